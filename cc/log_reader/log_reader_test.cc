// Tests of the native training-log reader core (also run under AddressSanitizer:
// bazel test --config=asan //cc/log_reader:all).
#include "cc/log_reader/log_reader.h"

#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cc/log_reader/json.h"
#include "gtest/gtest.h"

namespace mlgo::logreader {
namespace {

// ---------------------------------------------------------------- JSON

JsonValue Json(const std::string& s) { return ParseJson(s.data(), s.size()); }

bool JsonOk(const std::string& s) {
  try {
    Json(s);
    return true;
  } catch (const JsonError&) {
    return false;
  }
}

TEST(Json, ParsesWhatLlvmWrites) {
  JsonValue v = Json(R"({"name":"mask","type":"int64_t","port":0,"shape":[1,33]})");
  ASSERT_EQ(v.kind, JsonValue::Kind::kObject);
  EXPECT_EQ(v.Find("name")->str, "mask");
  EXPECT_EQ(v.Find("shape")->array.size(), 2u);
  EXPECT_EQ(v.Find("shape")->array[1].integer, 33);
  EXPECT_EQ(v.Find("missing"), nullptr);
}

TEST(Json, Numbers) {
  EXPECT_EQ(Json("9223372036854775807").integer, INT64_MAX);
  EXPECT_EQ(Json("-9223372036854775808").integer, INT64_MIN);
  EXPECT_EQ(Json("9223372036854775808").kind, JsonValue::Kind::kBigInt);
  EXPECT_EQ(Json("-9223372036854775809").kind, JsonValue::Kind::kBigInt);
  EXPECT_EQ(Json("-0").integer, 0);
  EXPECT_EQ(Json("1.5").kind, JsonValue::Kind::kFloat);
  EXPECT_EQ(Json("1e5").kind, JsonValue::Kind::kFloat);
  EXPECT_EQ(Json("1E-5").kind, JsonValue::Kind::kFloat);
  EXPECT_TRUE(JsonOk(std::string(4300, '7')));
  EXPECT_FALSE(JsonOk(std::string(4301, '7')));
  for (const char* bad : {"01", "1.", ".5", "-", "+1", "1e", "1.e3", "0x10", "NaN",
                          "Infinity", "-Infinity", "1 2"})
    EXPECT_FALSE(JsonOk(bad)) << bad;
}

TEST(Json, StringsAndEscapes) {
  JsonValue v = Json(R"("a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00")");
  EXPECT_EQ(v.str, "a\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_FALSE(v.lone_surrogate);
  JsonValue lone = Json(R"("\ud800x")");
  EXPECT_TRUE(lone.lone_surrogate);
  EXPECT_TRUE(Json(R"("\udc00\ud800")").lone_surrogate);
  for (const char* bad : {"\"abc", "\"\\x\"", "\"\\u12\"", "\"\\u12g4\"", "\"a\tb\"",
                          "\"\\ud800\\uzzzz\""})
    EXPECT_FALSE(JsonOk(bad)) << bad;
}

TEST(Json, StructureRules) {
  EXPECT_TRUE(JsonOk(" \t\r\n{ \"a\" : [ 1 , 2 ] , \"b\" : { } } \n"));
  EXPECT_FALSE(JsonOk("{\"a\":1,\"a\":2}"));
  EXPECT_FALSE(JsonOk("{\"a\":1,}"));
  EXPECT_FALSE(JsonOk("[1,]"));
  EXPECT_FALSE(JsonOk("{a:1}"));
  EXPECT_FALSE(JsonOk(""));
  EXPECT_FALSE(JsonOk("tru"));
  EXPECT_TRUE(JsonOk(std::string(64, '[') + std::string(64, ']')));
  EXPECT_FALSE(JsonOk(std::string(65, '[') + std::string(65, ']')));
  EXPECT_FALSE(JsonOk(std::string(100000, '[')));  // no stack overflow
}

TEST(Utf8, StrictLikePython) {
  EXPECT_TRUE(IsValidUtf8("plain", 5));
  EXPECT_TRUE(IsValidUtf8("\xc3\xa9\xf0\x9f\x98\x80", 6));
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf", 2));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xe0\x80\xaf", 3));      // overlong
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80", 3));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80", 4));  // > U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xc3", 1));              // truncated
  EXPECT_FALSE(IsValidUtf8("\xff", 1));
}

// ---------------------------------------------------------------- streams

std::string Spec(const std::string& name, const std::string& type, const std::string& shape) {
  return "{\"name\":\"" + name + "\",\"type\":\"" + type + "\",\"port\":0,\"shape\":" + shape + "}";
}

template <typename T>
std::string Bytes(std::initializer_list<T> values) {
  std::string s;
  for (T v : values) s.append(reinterpret_cast<const char*>(&v), sizeof(T));
  return s;
}

// Header with every type, then contexts with observations and outcomes.
std::string SampleStream() {
  std::string h = "{\"features\":[" + Spec("f", "float", "[2]") + "," + Spec("d", "double", "[]") +
                  "," + Spec("i8", "int8_t", "[1,3]") + "," + Spec("u8", "uint8_t", "[1]") + "," +
                  Spec("i16", "int16_t", "[1]") + "," + Spec("u16", "uint16_t", "[1]") + "," +
                  Spec("i32", "int32_t", "[1]") + "," + Spec("u32", "uint32_t", "[1]") + "," +
                  Spec("i64", "int64_t", "[2,1]") + "," + Spec("u64", "uint64_t", "[1]") +
                  "],\"score\":" + Spec("reward", "float", "[1]") + "}\n";
  std::string s = h;
  for (int c = 0; c < 3; ++c) {
    s += "{\"context\":\"fn" + std::to_string(c) + "\"}\n";
    for (int i = 0; i < c + 1; ++i) {
      s += "{\"observation\":" + std::to_string(i) + "}\n";
      s += Bytes<float>({1.5f * i, 10.0f}) + Bytes<double>({-2.0 * c});
      s += Bytes<int8_t>({-1, 10, static_cast<int8_t>(i)});  // 10 == '\n' inside data
      s += Bytes<uint8_t>({255}) + Bytes<int16_t>({-300}) + Bytes<uint16_t>({65535});
      s += Bytes<int32_t>({-70000}) + Bytes<uint32_t>({4000000000u});
      s += Bytes<int64_t>({INT64_MIN, 10}) + Bytes<uint64_t>({UINT64_MAX});
      s += "\n";
      s += "{\"outcome\":" + std::to_string(i) + "}\n" + Bytes<float>({0.25f * c}) + "\n";
    }
  }
  return s;
}

// A source that hands out at most `step` bytes per read, to exercise buffering.
class Trickle : public Source {
 public:
  Trickle(std::string data, size_t step) : data_(std::move(data)), step_(step) {}
  size_t Read(char* buf, size_t max) override {
    size_t n = std::min({max, step_, data_.size() - pos_});
    std::memcpy(buf, data_.data() + pos_, n);
    pos_ += n;
    return n;
  }

 private:
  std::string data_;
  size_t step_;
  size_t pos_ = 0;
};

Reader MemReader(const std::string& s) {
  return Reader(std::make_unique<MemorySource>(s.data(), s.size()));
}

// Every event as a string, or "ERROR@offset" at the end if one was raised.
std::vector<std::string> Trace(Reader& r) {
  std::vector<std::string> out;
  try {
    const Header& h = r.header();
    out.push_back("header " + std::to_string(h.features.size()));
    while (true) {
      const Event& ev = r.Next();
      switch (ev.kind) {
        case Event::Kind::kEnd:
          return out;
        case Event::Kind::kContext:
          out.push_back("c " + ev.context);
          break;
        case Event::Kind::kObservation:
          out.push_back("o " + std::to_string(ev.index) + " " + std::string(ev.data, ev.size));
          break;
        case Event::Kind::kOutcome:
          out.push_back("r " + std::to_string(ev.index) + " " + std::string(ev.data, ev.size));
          break;
      }
    }
  } catch (const FormatError& e) {
    out.push_back("ERROR@" + std::to_string(e.offset()));
  }
  return out;
}

TEST(Reader, DecodesEveryType) {
  std::string s = SampleStream();
  Reader r = MemReader(s);
  const Header& h = r.header();
  ASSERT_EQ(h.features.size(), 10u);
  EXPECT_EQ(h.features[0].dtype, DType::kFloat);
  EXPECT_EQ(h.features[8].dtype, DType::kInt64);
  EXPECT_EQ(h.features[8].nbytes, 16u);
  EXPECT_EQ(h.features[1].shape.size(), 0u);
  EXPECT_EQ(h.features[1].nbytes, 8u);
  EXPECT_EQ(h.observation_bytes, 8u + 8 + 3 + 1 + 2 + 2 + 4 + 4 + 16 + 8);
  ASSERT_TRUE(h.score.has_value());
  EXPECT_EQ(h.score->name, "reward");
  std::vector<std::string> t = Trace(r);
  ASSERT_EQ(t.size(), 1u + 3 + 2 * (1 + 2 + 3));
  EXPECT_EQ(t[1], "c fn0");
  const std::string& obs = t[2];
  ASSERT_EQ(obs.substr(0, 4), "o 0 ");
  const char* p = obs.data() + 4;
  float f[2];
  std::memcpy(f, p, 8);
  EXPECT_EQ(f[1], 10.0f);
  int64_t i64;
  std::memcpy(&i64, p + 8 + 8 + 3 + 1 + 2 + 2 + 4 + 4, 8);
  EXPECT_EQ(i64, INT64_MIN);
  EXPECT_EQ(t.back().substr(0, 4), "r 2 ");
}

TEST(Reader, ReadAllGroupsContexts) {
  std::string h = "{\"features\":[" + Spec("x", "int32_t", "[2]") + "]}\n";
  auto obs = [](int i, int32_t a) {
    return "{\"observation\":" + std::to_string(i) + "}\n" + Bytes<int32_t>({a, a + 1}) + "\n";
  };
  std::string s = h + obs(0, 1) + "{\"context\":\"f\"}\n" + obs(0, 10) + "{\"context\":\"g\"}\n" +
                  "{\"context\":\"f\"}\n" + obs(1, 20);
  Reader r = MemReader(s);
  LogData d = ReadAll(r);
  ASSERT_EQ(d.contexts.size(), 3u);
  EXPECT_EQ(d.contexts[0].name, "");
  EXPECT_EQ(d.contexts[1].name, "f");
  EXPECT_EQ(d.contexts[2].name, "g");
  EXPECT_EQ(d.contexts[1].indices, (std::vector<int64_t>{0, 1}));
  ASSERT_EQ(d.contexts[1].features[0].size(), 16u);
  int32_t v[4];
  std::memcpy(v, d.contexts[1].features[0].data(), 16);
  EXPECT_EQ(v[0], 10);
  EXPECT_EQ(v[3], 21);
  EXPECT_EQ(d.contexts[2].indices.size(), 0u);
  EXPECT_EQ(d.contexts[1].num_outcomes, 0u);
}

TEST(Reader, SameResultWhateverTheReadSizes) {
  std::string s = SampleStream();
  Reader whole = MemReader(s);
  std::vector<std::string> expect = Trace(whole);
  for (size_t step : {1, 2, 3, 7, 64, 4096}) {
    Reader r(std::make_unique<Trickle>(s, step));
    EXPECT_EQ(Trace(r), expect) << step;
  }
}

TEST(Reader, PipeReturnsEachRecordWithoutWaitingForMore) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::string h = "{\"features\":[" + Spec("a", "int64_t", "[2]") + "]}\n";
  Reader r(std::make_unique<FdSource>(fds[0], true));
  ASSERT_EQ(write(fds[1], h.data(), h.size()), static_cast<ssize_t>(h.size()));
  EXPECT_EQ(r.header().features[0].name, "a");
  for (int i = 0; i < 3; ++i) {
    std::string rec = "{\"observation\":" + std::to_string(i) + "}\n" + Bytes<int64_t>({i, 10}) + "\n";
    ASSERT_EQ(write(fds[1], rec.data(), rec.size()), static_cast<ssize_t>(rec.size()));
    const Event& ev = r.Next();  // would block forever if it wanted more bytes
    ASSERT_EQ(ev.kind, Event::Kind::kObservation);
    int64_t v;
    std::memcpy(&v, ev.data, 8);
    EXPECT_EQ(v, i);
  }
  std::thread closer([&] { close(fds[1]); });
  EXPECT_EQ(r.Next().kind, Event::Kind::kEnd);
  closer.join();
}

TEST(Reader, ErrorsNameTheRecordOffsetAndStick) {
  std::string h = "{\"features\":[" + Spec("a", "int64_t", "[2]") + "]}\n";
  std::string s = h + "{\"observation\":0}\n" + std::string(16, '\0') + "X";
  Reader r = MemReader(s);
  r.header();
  try {
    r.Next();
    FAIL() << "no error";
  } catch (const FormatError& e) {
    EXPECT_EQ(e.offset(), h.size());
    EXPECT_NE(std::string(e.what()).find("not a newline"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("byte " + std::to_string(h.size())), std::string::npos);
  }
  EXPECT_THROW(r.Next(), FormatError);
}

TEST(Reader, RejectsBadHeaders) {
  const std::vector<std::string> bad = {
      "",
      "{}\n",
      "[]\n",
      "{\"features\":{}}\n",
      "{\"features\":[" + Spec("a", "int128_t", "[1]") + "]}\n",
      "{\"features\":[" + Spec("a", "float", "[-1]") + "]}\n",
      "{\"features\":[" + Spec("a", "float", "[2147483648]") + "]}\n",
      "{\"features\":[" + Spec("a", "float", "[2147483647,2147483647,2147483647,2147483647]") + "]}\n",
      "{\"features\":[" + Spec("a", "float", "[268435457]") + "]}\n",
      "{\"features\":[" + Spec("a", "float", "1") + "]}\n",
      "{\"features\":[{\"name\":\"a\",\"type\":\"float\"}]}\n",
      "{\"features\":[{\"type\":\"float\",\"shape\":[1]}]}\n",
      "{\"features\":[{\"name\":\"a\",\"type\":\"float\",\"shape\":[1],\"port\":2147483648}]}\n",
      "{\"features\":[" + Spec("a", "float", "[1]") + "," + Spec("a", "float", "[1]") + "]}\n",
      "{\"features\":[],\"score\":null}\n",
      "{\"features\":[]}",  // no newline
  };
  for (const std::string& s : bad) {
    Reader r = MemReader(s);
    EXPECT_THROW(r.header(), FormatError) << s;
  }
  // At the limit: 2^28 floats is exactly 1 GiB; zero dims make huge shapes empty.
  for (const std::string& shape : {"[268435456]", "[0,2147483647,2147483647]", "[2147483647,0]"}) {
    std::string s = "{\"features\":[" + Spec("a", "float", shape) + "]}\n";
    Reader r = MemReader(s);
    EXPECT_NO_THROW(r.header()) << shape;
  }
}

TEST(Reader, TruncationAtEveryByte) {
  std::string s = SampleStream();
  // Offsets where a record ends: truncating there is a clean, shorter stream.
  std::vector<size_t> ends;
  {
    Reader r = MemReader(s);
    r.header();
    ends.push_back(r.offset());
    while (r.Next().kind != Event::Kind::kEnd) ends.push_back(r.offset());
  }
  for (size_t n = 0; n <= s.size(); ++n) {
    std::string cut = s.substr(0, n);
    Reader r = MemReader(cut);
    std::vector<std::string> t = Trace(r);
    bool clean = std::find(ends.begin(), ends.end(), n) != ends.end();
    EXPECT_EQ(t.back().rfind("ERROR@", 0) != 0, clean) << n;
  }
}

// Thousands of random mutations: the reader returns events or a FormatError,
// never crashes or reads out of bounds (ASan checks the latter).
TEST(Reader, RandomCorruptionNeverCrashes) {
  const std::string base = SampleStream();
  const size_t hdr = base.find('\n') + 1;
  const std::vector<std::string> tokens = {
      "0", "-1", "1e3", "2147483648", "99999999999999999999", "[1,33]", "[65536,65536]",
      "[2147483647,2147483647,2147483647]", "[]", "\"x\"", "null", "true", "NaN", "{}",
      std::string(70, '[') + std::string(70, ']'), "\"\\ud800\"", "\xff", "\n",
      "\"int64_t\"", "\"uint8_t\"", "\"double\"", "{\"context\":\"a\"}\n",
      "{\"observation\":0}\n", "{\"outcome\":1}\n", std::string(5000, '1')};
  std::mt19937 rng(42);
  auto pick = [&](size_t n) { return n ? static_cast<size_t>(rng() % n) : 0; };
  int errors = 0, ok = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string d = base;
    int edits = 1 + static_cast<int>(pick(3));
    for (int e = 0; e < edits; ++e) {
      size_t pos = (rng() & 1) ? pick(d.size() + 1) : pick(std::min(hdr, d.size()) + 1);
      switch (pick(7)) {
        case 0: d.resize(pos); break;
        case 1: if (!d.empty()) d[std::min(pos, d.size() - 1)] ^= static_cast<char>(1 << pick(8)); break;
        case 2: if (!d.empty()) d[std::min(pos, d.size() - 1)] = static_cast<char>(rng()); break;
        case 3: {
          std::string ins(1 + pick(8), '\0');
          for (char& c : ins) c = static_cast<char>(rng());
          d.insert(pos, ins);
          break;
        }
        case 4: d.erase(pos, 1 + pick(40)); break;
        case 5: d.replace(pos, 1 + pick(12), tokens[pick(tokens.size())]); break;
        default: d.insert(pos, d.substr(pos, 1 + pick(200))); break;
      }
    }
    // Exact-size heap copy so ASan flags any read past the end.
    std::unique_ptr<char[]> exact(new char[d.size() ? d.size() : 1]);
    std::memcpy(exact.get(), d.data(), d.size());
    Reader r(std::make_unique<MemorySource>(exact.get(), d.size()));
    std::vector<std::string> t = Trace(r);
    (t.back().rfind("ERROR@", 0) == 0 ? errors : ok)++;
    if (iter % 3 == 0) {  // and whole-log reading, through a trickling source
      Reader r2(std::make_unique<Trickle>(d, 1 + pick(100)));
      try {
        LogData all = ReadAll(r2);
        EXPECT_NE(t.back().rfind("ERROR@", 0), 0u);
      } catch (const FormatError&) {
        EXPECT_EQ(t.back().rfind("ERROR@", 0), 0u);
      }
    }
  }
  EXPECT_GT(errors, 5000);
  EXPECT_GT(ok, 100);
}

}  // namespace
}  // namespace mlgo::logreader
