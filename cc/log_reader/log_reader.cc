#include "cc/log_reader/log_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <system_error>
#include <unordered_map>
#include <utility>

#include "cc/log_reader/json.h"

namespace mlgo::logreader {

namespace {

constexpr size_t kMaxChunk = size_t{1} << 20;
constexpr int64_t kMaxIndex = INT64_MAX;

struct TypeInfo {
  DType type;
  const char* name;
  size_t size;
};

constexpr TypeInfo kTypes[] = {
    {DType::kFloat, "float", 4},     {DType::kDouble, "double", 8},
    {DType::kInt8, "int8_t", 1},     {DType::kUInt8, "uint8_t", 1},
    {DType::kInt16, "int16_t", 2},   {DType::kUInt16, "uint16_t", 2},
    {DType::kInt32, "int32_t", 4},   {DType::kUInt32, "uint32_t", 4},
    {DType::kInt64, "int64_t", 8},   {DType::kUInt64, "uint64_t", 8},
};

// Python-repr-like quoting of a name for messages (bounded length).
std::string Quote(const std::string& s) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 200; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > 200) out += "...";
  return out + "'";
}

std::string Describe(const JsonValue& v) {
  switch (v.kind) {
    case JsonValue::Kind::kNull: return "None";
    case JsonValue::Kind::kBool: return v.boolean ? "True" : "False";
    case JsonValue::Kind::kInt: return std::to_string(v.integer);
    case JsonValue::Kind::kBigInt: return v.negative ? "a huge negative integer" : "a huge integer";
    case JsonValue::Kind::kFloat: return "a float";
    case JsonValue::Kind::kString: return Quote(v.str);
    case JsonValue::Kind::kArray: return "an array";
    case JsonValue::Kind::kObject: return "an object";
  }
  return "?";
}

JsonValue ParseLine(const char* line, size_t size, uint64_t offset, const char* what) {
  if (!IsValidUtf8(line, size))
    throw FormatError(offset, std::string(what) + " is not valid JSON (not valid UTF-8)");
  try {
    return ParseJson(line, size);
  } catch (const JsonError& e) {
    throw FormatError(offset, std::string(what) + " is not valid JSON (" + e.what() + ")");
  }
}

const std::string& CheckText(const JsonValue& v, uint64_t offset, const std::string& what) {
  if (v.kind != JsonValue::Kind::kString) throw FormatError(offset, what + " must be a string");
  if (v.lone_surrogate)
    throw FormatError(offset, what + " is not valid Unicode (lone surrogate)");
  return v.str;
}

TensorSpec ParseSpec(const JsonValue& obj, uint64_t offset, std::string what) {
  if (obj.kind != JsonValue::Kind::kObject) throw FormatError(offset, what + " must be an object");
  TensorSpec spec;
  const JsonValue* name = obj.Find("name");
  if (!name) throw FormatError(offset, what + " has no \"name\"");
  spec.name = CheckText(*name, offset, what + " name");
  what += " " + Quote(spec.name);
  const JsonValue* type = obj.Find("type");
  if (!type) throw FormatError(offset, what + " has no \"type\"");
  std::optional<DType> dt;
  if (type->kind == JsonValue::Kind::kString) dt = DTypeFromName(type->str);
  if (!dt) throw FormatError(offset, what + " has unsupported type " + Describe(*type));
  spec.dtype = *dt;
  if (const JsonValue* port = obj.Find("port")) {
    if (!port->is_int() || port->integer < INT32_MIN || port->integer > INT32_MAX)
      throw FormatError(offset, what + " has a bad \"port\" (not a 32-bit integer)");
    spec.port = port->integer;
  }
  const JsonValue* shape = obj.Find("shape");
  if (!shape) throw FormatError(offset, what + " has no \"shape\"");
  if (shape->kind != JsonValue::Kind::kArray)
    throw FormatError(offset, what + " shape must be an array");
  bool zero = false;
  for (const JsonValue& d : shape->array) {
    if (!d.is_int() || d.integer < 0 || d.integer > kMaxDim)
      throw FormatError(offset, what + " has a bad dimension " + Describe(d) +
                                    " (must be an integer in 0.." + std::to_string(kMaxDim) + ")");
    spec.shape.push_back(d.integer);
    if (d.integer == 0) zero = true;
  }
  // Every dimension is at least 1 unless one is 0, so the product only grows:
  // stopping at the first step over the limit decides like the exact product.
  const uint64_t esize = DTypeSize(spec.dtype);
  uint64_t n = 1;
  bool too_large = false;
  if (zero) {
    n = 0;
  } else {
    for (int64_t d : spec.shape) {
      n *= static_cast<uint64_t>(d);  // n <= 2^30 and d < 2^31: no overflow
      if (n * esize > kMaxTensorBytes) {
        too_large = true;
        break;
      }
    }
  }
  if (too_large)
    throw FormatError(offset, what + " is too large (limit " + std::to_string(kMaxTensorBytes) +
                                  " bytes)");
  spec.elements = n;
  spec.nbytes = n * esize;
  return spec;
}

}  // namespace

const char* DTypeName(DType t) { return kTypes[static_cast<int>(t)].name; }
size_t DTypeSize(DType t) { return kTypes[static_cast<int>(t)].size; }
std::optional<DType> DTypeFromName(const std::string& name) {
  for (const TypeInfo& t : kTypes)
    if (name == t.name) return t.type;
  return std::nullopt;
}

FormatError::FormatError(uint64_t offset, std::string problem)
    : std::runtime_error("malformed training log at byte " + std::to_string(offset) + ": " +
                         problem),
      offset_(offset),
      problem_(std::move(problem)) {}

FdSource::~FdSource() {
  if (owned_) ::close(fd_);
}

size_t FdSource::Read(char* buf, size_t max) {
  while (true) {
    ssize_t n = ::read(fd_, buf, max);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR) throw std::system_error(errno, std::generic_category(), "read");
  }
}

std::unique_ptr<Source> OpenFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), path);
  return std::make_unique<FdSource>(fd, true);
}

size_t MemorySource::Read(char* buf, size_t max) {
  size_t n = std::min(max, size_ - pos_);
  if (n) std::memcpy(buf, data_ + pos_, n);
  pos_ += n;
  return n;
}

Header ParseHeader(const char* line, size_t size, uint64_t offset) {
  JsonValue obj = ParseLine(line, size, offset, "header");
  if (obj.kind != JsonValue::Kind::kObject)
    throw FormatError(offset, "header must be a JSON object");
  const JsonValue* feats = obj.Find("features");
  if (!feats) throw FormatError(offset, "header has no \"features\"");
  if (feats->kind != JsonValue::Kind::kArray)
    throw FormatError(offset, "header \"features\" must be an array");
  Header h;
  std::unordered_map<std::string, int> names;
  uint64_t total = 0;
  for (size_t i = 0; i < feats->array.size(); ++i) {
    TensorSpec spec = ParseSpec(feats->array[i], offset, "feature " + std::to_string(i));
    if (!names.emplace(spec.name, 0).second)
      throw FormatError(offset, "duplicate feature name " + Quote(spec.name));
    total += spec.nbytes;  // each <= 2^30, at most ~2^24 features: no overflow
    h.features.push_back(std::move(spec));
  }
  if (total > kMaxRecordBytes)
    throw FormatError(offset, "an observation would take " + std::to_string(total) +
                                  " bytes (limit " + std::to_string(kMaxRecordBytes) + ")");
  h.observation_bytes = total;
  if (const JsonValue* s = obj.Find("score")) h.score = ParseSpec(*s, offset, "score");
  if (const JsonValue* a = obj.Find("advice")) h.advice = ParseSpec(*a, offset, "advice");
  return h;
}

Reader::Reader(std::unique_ptr<Source> source) : source_(std::move(source)) {}

void Reader::Fail(uint64_t offset, std::string problem) {
  error_.emplace(offset, std::move(problem));
  throw *error_;
}

bool Reader::Fill(size_t want) {
  if (eof_) return false;
  if (cap_ - end_ < chunk_) {
    if (pos_ > 0) {  // drop consumed bytes first
      std::memmove(buf_.get(), buf_.get() + pos_, end_ - pos_);
      base_ += pos_;
      end_ -= pos_;
      pos_ = 0;
    }
    if (cap_ - end_ < chunk_) {
      size_t cap = std::max(cap_ * 2, end_ + std::max(chunk_, want));
      std::unique_ptr<char[]> bigger(new char[cap]);  // not zeroed: only [0, end_) is read
      if (end_) std::memcpy(bigger.get(), buf_.get(), end_);
      buf_ = std::move(bigger);
      cap_ = cap;
    }
  }
  size_t room = cap_ - end_;
  size_t n = source_->Read(buf_.get() + end_, room);
  if (n == 0) {
    eof_ = true;
    return false;
  }
  // Sources that fill every read (files) get bigger reads, up to kMaxChunk.
  if (n == room && chunk_ < kMaxChunk) chunk_ *= 2;
  end_ += n;
  return true;
}

bool Reader::Need(size_t n) {
  while (end_ - pos_ < n)
    if (!Fill(0)) return false;
  return true;
}

bool Reader::Line(size_t limit, const char* what, bool eof_ok, const char** line, size_t* len) {
  const uint64_t start = offset();
  size_t scanned = 0;  // bytes after pos_ known to hold no newline
  while (true) {
    size_t have = end_ - pos_;
    size_t lim = std::min(have, limit + 1);
    if (scanned < lim) {
      const char* from = buf_.get() + pos_ + scanned;
      const void* nl = std::memchr(from, '\n', lim - scanned);
      if (nl) {
        *line = buf_.get() + pos_;
        *len = static_cast<const char*>(nl) - *line;
        pos_ += *len + 1;
        return true;
      }
      scanned = lim;
    }
    if (have > limit)
      Fail(start, std::string(what) + " line longer than " + std::to_string(limit) + " bytes");
    if (!Fill(0)) {
      if (have == 0 && eof_ok) return false;
      Fail(start, std::string("stream ends inside the ") + what + " line (" +
                      std::to_string(have) + " bytes, no newline)");
    }
  }
}

void Reader::ReadHeader() {
  const char* line;
  size_t len;
  if (!Line(kMaxHeaderLine, "header", true, &line, &len)) Fail(0, "empty stream: no header");
  try {
    header_ = ParseHeader(line, len, 0);
  } catch (const FormatError& e) {
    error_ = e;
    throw;
  }
  have_header_ = true;
}

const Header& Reader::header() {
  if (!have_header_) {
    if (error_) throw *error_;
    ReadHeader();
  }
  return header_;
}

const Event& Reader::Next() {
  header();
  if (error_) throw *error_;
  ReadEvent();
  return event_;
}

void Reader::Tensors(size_t n, uint64_t start, const std::string& what) {
  if (!Need(n + 1))
    Fail(start, "stream ends inside " + what + " data and its closing newline: " +
                    std::to_string(n + 1) + " bytes expected, " + std::to_string(end_ - pos_) +
                    " present");
  unsigned char after = static_cast<unsigned char>(buf_[pos_ + n]);
  if (after != '\n') {
    static const char* hex = "0123456789abcdef";
    std::string b = "0x";
    b += hex[after >> 4];
    b += hex[after & 15];
    Fail(start, what + ": " + std::to_string(n) + " bytes of tensor data are followed by byte " +
                    b + ", not a newline");
  }
  event_.data = buf_.get() + pos_;
  event_.size = n;
  pos_ += n + 1;
}

namespace {
// {"observation":N} exactly as LLVM writes it, N of at most 18 digits.
bool FastObservation(const char* line, size_t len, int64_t* index) {
  static constexpr char kPrefix[] = "{\"observation\":";
  constexpr size_t kP = sizeof(kPrefix) - 1;
  if (len < kP + 2 || len > kP + 19 || std::memcmp(line, kPrefix, kP) != 0 ||
      line[len - 1] != '}')
    return false;
  const char* d = line + kP;
  size_t nd = len - kP - 1;
  if (nd > 1 && d[0] == '0') return false;
  int64_t v = 0;
  for (size_t i = 0; i < nd; ++i) {
    if (d[i] < '0' || d[i] > '9') return false;
    v = v * 10 + (d[i] - '0');
  }
  *index = v;
  return true;
}
}  // namespace

void Reader::ReadEvent() {
  const uint64_t start = offset();
  event_.offset = start;
  event_.data = nullptr;
  event_.size = 0;
  const char* line;
  size_t len;
  if (!Line(kMaxEventLine, "event", true, &line, &len)) {
    event_.kind = Event::Kind::kEnd;
    return;
  }
  int64_t index;
  bool observation;
  if (FastObservation(line, len, &index)) {
    observation = true;
  } else {
    JsonValue obj;
    try {
      obj = ParseLine(line, len, start, "event line");
    } catch (const FormatError& e) {
      Fail(e.offset(), e.problem());
    }
    if (obj.kind != JsonValue::Kind::kObject || obj.object.size() != 1)
      Fail(start,
           "event line must be a JSON object with exactly one key (context, observation or "
           "outcome)");
    const std::string& key = obj.object[0].first;
    const JsonValue& value = obj.object[0].second;
    if (key == "context") {
      try {
        event_.context = CheckText(value, start, "context name");
      } catch (const FormatError& e) {
        Fail(e.offset(), e.problem());
      }
      event_.kind = Event::Kind::kContext;
      return;
    }
    if (key != "observation" && key != "outcome")
      Fail(start, "unknown event " + Quote(key));
    if (!value.is_int() || value.integer < 0 || value.integer > kMaxIndex)
      Fail(start, key + " number must be an integer in 0.." + std::to_string(kMaxIndex));
    observation = key == "observation";
    index = value.integer;
  }
  event_.index = index;
  if (observation) {
    event_.kind = Event::Kind::kObservation;
    Tensors(header_.observation_bytes, start, "observation " + std::to_string(index));
    return;
  }
  if (!header_.score) Fail(start, "outcome in a stream whose header has no score");
  event_.kind = Event::Kind::kOutcome;
  Tensors(header_.score->nbytes, start, "outcome " + std::to_string(index));
}

LogData ReadAll(Reader& reader) {
  LogData out;
  out.header = reader.header();
  const Header& h = out.header;
  std::unordered_map<std::string, size_t> by_name;
  ContextData* current = nullptr;
  auto group = [&](const std::string& name) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      it = by_name.emplace(name, out.contexts.size()).first;
      out.contexts.emplace_back();
      out.contexts.back().name = name;
      out.contexts.back().features.resize(h.features.size());
    }
    return &out.contexts[it->second];
  };
  while (true) {
    const Event& ev = reader.Next();
    switch (ev.kind) {
      case Event::Kind::kEnd:
        return out;
      case Event::Kind::kContext:
        current = group(ev.context);
        break;
      case Event::Kind::kObservation: {
        if (!current) current = group("");
        const char* p = ev.data;
        for (size_t i = 0; i < h.features.size(); ++i) {
          size_t n = h.features[i].nbytes;
          current->features[i].insert(current->features[i].end(), p, p + n);
          p += n;
        }
        current->indices.push_back(ev.index);
        break;
      }
      case Event::Kind::kOutcome:
        if (!current) current = group("");
        current->outcomes.insert(current->outcomes.end(), ev.data, ev.data + ev.size);
        ++current->num_outcomes;
        break;
    }
  }
}

}  // namespace mlgo::logreader
