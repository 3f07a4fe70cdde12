// mlgo advisor server: answers LLVM's interactive channel with an XLA AOT-compiled policy.
//
//   advisor_server --channel_base=BASE [--log=PATH] [--record=PATH]
//
// Started next to a compiler run with -inliner-interactive-channel-base=BASE,
// -regalloc-evict-interactive-channel-base=BASE or
// -regalloc-priority-interactive-channel-base=BASE. Reads the compiler's observations
// from BASE.out (LLVM TrainingLogger format: a JSON header line, then context /
// observation / outcome records with raw tensor bytes) and writes each decision as raw
// bytes of the advice type to BASE.in. Creates the two FIFOs if they do not exist.
//
// The model's inputs are matched to the header's features by name, type and element
// count; a mismatch is reported (every difference) and the server exits with status 2
// before answering anything. Eviction answers are forced onto a column whose mask is 1,
// the same rule as the Python collector (32 = no eviction if allowed, else the lowest
// valid column); each forced change is counted as a correction.
//
// --log writes one line per decision: "<context>\t<index>\t<decision>\t<corrected>".
// --record copies the observation stream to a file (for replay and comparison).

#include "mlgo_model.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace {

// ---- a small JSON reader, enough for TrainingLogger header and record lines ----
struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  double num = 0;
  bool b = false;
  std::string str;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> fields;
  const Json *get(const std::string &k) const {
    for (const auto &f : fields)
      if (f.first == k) return &f.second;
    return nullptr;
  }
};

class JsonParser {
public:
  explicit JsonParser(const std::string &s) : s_(s) {}
  bool parse(Json &out, std::string &err) {
    if (!value(out)) {
      err = err_.empty() ? "malformed JSON" : err_;
      return false;
    }
    ws();
    if (i_ != s_.size()) {
      err = "trailing characters after JSON value";
      return false;
    }
    return true;
  }

private:
  void ws() {
    while (i_ < s_.size() && std::strchr(" \t\r\n", s_[i_])) ++i_;
  }
  bool fail(const char *m) {
    if (err_.empty()) err_ = std::string(m) + " at column " + std::to_string(i_);
    return false;
  }
  bool value(Json &v) {
    ws();
    if (i_ >= s_.size()) return fail("unexpected end");
    char c = s_[i_];
    if (c == '{') {
      v.kind = Json::Object;
      ++i_;
      ws();
      if (i_ < s_.size() && s_[i_] == '}') { ++i_; return true; }
      while (true) {
        ws();
        Json key;
        if (i_ >= s_.size() || s_[i_] != '"' || !string(key.str)) return fail("expected key");
        ws();
        if (i_ >= s_.size() || s_[i_] != ':') return fail("expected ':'");
        ++i_;
        Json val;
        if (!value(val)) return false;
        v.fields.emplace_back(key.str, std::move(val));
        ws();
        if (i_ < s_.size() && s_[i_] == ',') { ++i_; continue; }
        if (i_ < s_.size() && s_[i_] == '}') { ++i_; return true; }
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v.kind = Json::Array;
      ++i_;
      ws();
      if (i_ < s_.size() && s_[i_] == ']') { ++i_; return true; }
      while (true) {
        Json item;
        if (!value(item)) return false;
        v.items.push_back(std::move(item));
        ws();
        if (i_ < s_.size() && s_[i_] == ',') { ++i_; continue; }
        if (i_ < s_.size() && s_[i_] == ']') { ++i_; return true; }
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v.kind = Json::String;
      return string(v.str);
    }
    if (s_.compare(i_, 4, "true") == 0) { v.kind = Json::Bool; v.b = true; i_ += 4; return true; }
    if (s_.compare(i_, 5, "false") == 0) { v.kind = Json::Bool; i_ += 5; return true; }
    if (s_.compare(i_, 4, "null") == 0) { i_ += 4; return true; }
    char *end = nullptr;
    v.num = std::strtod(s_.c_str() + i_, &end);
    if (end == s_.c_str() + i_) return fail("unexpected character");
    v.kind = Json::Number;
    i_ = end - s_.c_str();
    return true;
  }
  bool string(std::string &out) {
    ++i_;  // opening quote
    while (i_ < s_.size() && s_[i_] != '"') {
      if (s_[i_] == '\\' && i_ + 1 < s_.size()) {
        char e = s_[++i_];
        switch (e) {
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case 'r': out += '\r'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'u':
            // Names in these headers are ASCII; keep other code points as '?'.
            if (i_ + 4 >= s_.size()) return fail("bad \\u escape");
            {
              long cp = std::strtol(s_.substr(i_ + 1, 4).c_str(), nullptr, 16);
              out += cp < 128 ? static_cast<char>(cp) : '?';
            }
            i_ += 4;
            break;
          default: out += e;
        }
        ++i_;
      } else {
        out += s_[i_++];
      }
    }
    if (i_ >= s_.size()) return fail("unterminated string");
    ++i_;
    return true;
  }
  const std::string &s_;
  size_t i_ = 0;
  std::string err_;
};

// ---- buffered reading of the channel ----
class Reader {
public:
  Reader(int fd, FILE *record) : fd_(fd), record_(record) {}
  // Reads through '\n' (excluded). False at EOF before any byte.
  bool line(std::string &out) {
    out.clear();
    while (true) {
      if (pos_ == len_ && !fill()) return !out.empty() ? (eofInLine_ = true, true) : false;
      char *nl = static_cast<char *>(std::memchr(buf_ + pos_, '\n', len_ - pos_));
      size_t n = nl ? nl - (buf_ + pos_) : len_ - pos_;
      out.append(buf_ + pos_, n);
      pos_ += n;
      if (nl) {
        ++pos_;
        return true;
      }
    }
  }
  bool exact(void *dst, size_t n) {
    char *d = static_cast<char *>(dst);
    while (n) {
      if (pos_ == len_ && !fill()) return false;
      size_t k = std::min(n, len_ - pos_);
      std::memcpy(d, buf_ + pos_, k);
      pos_ += k;
      d += k;
      n -= k;
    }
    return true;
  }
  uint64_t offset() const { return consumed_ - (len_ - pos_); }
  bool eofInLine_ = false;

private:
  bool fill() {
    ssize_t r;
    do {
      r = ::read(fd_, buf_, sizeof(buf_));
    } while (r < 0 && errno == EINTR);
    if (r <= 0) return false;
    if (record_) std::fwrite(buf_, 1, r, record_);
    pos_ = 0;
    len_ = r;
    consumed_ += r;
    return true;
  }
  int fd_;
  FILE *record_;
  char buf_[1 << 16];
  size_t pos_ = 0, len_ = 0;
  uint64_t consumed_ = 0;
};

struct Feature {
  std::string name, type;
  int64_t elements = 1;
  size_t bytes = 0;
  size_t offset = 0;  // within one observation record
};

size_t typeSize(const std::string &t) {
  if (t == "int64_t" || t == "double" || t == "uint64_t") return 8;
  if (t == "int32_t" || t == "float" || t == "uint32_t") return 4;
  if (t == "int16_t" || t == "uint16_t") return 2;
  if (t == "int8_t" || t == "uint8_t" || t == "bool") return 1;
  return 0;
}

bool parseSpec(const Json &j, Feature &f, std::string &err) {
  const Json *n = j.get("name"), *t = j.get("type"), *s = j.get("shape");
  if (!n || n->kind != Json::String || !t || t->kind != Json::String || !s ||
      s->kind != Json::Array) {
    err = "tensor spec without name/type/shape";
    return false;
  }
  f.name = n->str;
  f.type = t->str;
  f.elements = 1;
  for (const auto &d : s->items) f.elements *= static_cast<int64_t>(d.num);
  size_t ts = typeSize(f.type);
  if (!ts) {
    err = "unsupported tensor type '" + f.type + "' for '" + f.name + "'";
    return false;
  }
  f.bytes = ts * f.elements;
  return true;
}

bool isBookkeeping(const std::string &n) {
  for (const char *b : mlgo_model::kBookkeeping)
    if (n == b) return true;
  return false;
}

double outputAsDouble(const void *p, const std::string &t, int64_t i) {
  if (t == "int64_t") return static_cast<const int64_t *>(p)[i];
  if (t == "int32_t") return static_cast<const int32_t *>(p)[i];
  if (t == "float") return static_cast<const float *>(p)[i];
  if (t == "double") return static_cast<const double *>(p)[i];
  if (t == "int8_t") return static_cast<const int8_t *>(p)[i];
  return static_cast<const uint8_t *>(p)[i];
}

int openFifo(const std::string &path, int flags) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (::mkfifo(path.c_str(), 0600) != 0 && errno != EEXIST) {
      std::fprintf(stderr, "advisor_server: cannot create FIFO %s: %s\n", path.c_str(),
                   std::strerror(errno));
      return -1;
    }
  }
  int fd;
  do {
    fd = ::open(path.c_str(), flags);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0)
    std::fprintf(stderr, "advisor_server: cannot open %s: %s\n", path.c_str(),
                 std::strerror(errno));
  return fd;
}

bool writeAll(int fd, const void *p, size_t n) {
  const char *c = static_cast<const char *>(p);
  while (n) {
    ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= w;
  }
  return true;
}

int usage() {
  std::fprintf(stderr,
               "usage: advisor_server --channel_base=BASE [--log=PATH] [--record=PATH]\n"
               "  serves LLVM's interactive channel BASE.out -> BASE.in with the compiled "
               "%s policy\n",
               mlgo_model::kProblem);
  return 64;
}

}  // namespace

int main(int argc, char **argv) {
  std::string base, logPath, recordPath;
  bool quiet = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](const char *flag) -> const char * {
      size_t n = std::strlen(flag);
      if (a.compare(0, n, flag) == 0 && a.size() > n && a[n] == '=') return argv[i] + n + 1;
      return nullptr;
    };
    if (const char *v = val("--channel_base")) base = v;
    else if (const char *v = val("--log")) logPath = v;
    else if (const char *v = val("--record")) recordPath = v;
    else if (a == "--quiet") quiet = true;
    else if (a == "--print_spec") {
      for (const auto &in : mlgo_model::kInputs)
        std::printf("%s %s %lld\n", in.name, in.type, static_cast<long long>(in.elements));
      std::printf("-> %s %s %lld\n", mlgo_model::kOutput.name, mlgo_model::kOutput.type,
                  static_cast<long long>(mlgo_model::kOutput.elements));
      return 0;
    } else return usage();
  }
  if (base.empty()) return usage();

  // Opening BASE.in read-write never blocks (whatever order the compiler opens the two
  // files in); BASE.out blocks until the compiler opens it for writing.
  int outFd = -1;
  int inFd = openFifo(base + ".in", O_RDWR);
  if (inFd >= 0) outFd = openFifo(base + ".out", O_RDONLY);
  if (inFd < 0 || outFd < 0) return 1;
  FILE *record = recordPath.empty() ? nullptr : std::fopen(recordPath.c_str(), "wb");
  FILE *log = logPath.empty() ? nullptr : std::fopen(logPath.c_str(), "w");
  Reader rd(outFd, record);

  std::string line, err;
  if (!rd.line(line)) {
    // The compiler closed the channel without using it (no decision to make in this
    // module). Whether the compile succeeded is the compiler's exit status to tell.
    if (!quiet)
      std::fprintf(stderr, "advisor_server: 0 decisions (%s.out closed before any header)\n",
                   base.c_str());
    return 0;
  }
  Json header;
  if (!JsonParser(line).parse(header, err)) {
    std::fprintf(stderr, "advisor_server: bad header line at byte 0 of %s.out: %s\n",
                 base.c_str(), err.c_str());
    return 1;
  }
  std::vector<Feature> feats;
  size_t obsBytes = 0;
  const Json *fj = header.get("features");
  if (!fj || fj->kind != Json::Array) {
    std::fprintf(stderr, "advisor_server: header has no \"features\" list\n");
    return 1;
  }
  for (const auto &j : fj->items) {
    Feature f;
    if (!parseSpec(j, f, err)) {
      std::fprintf(stderr, "advisor_server: header: %s\n", err.c_str());
      return 1;
    }
    f.offset = obsBytes;
    obsBytes += f.bytes;
    feats.push_back(f);
  }
  Feature score, advice;
  bool hasScore = false;
  if (const Json *sj = header.get("score")) hasScore = parseSpec(*sj, score, err);
  std::string adviceType = mlgo_model::kOutput.type;
  if (const Json *aj = header.get("advice"))
    if (parseSpec(*aj, advice, err)) adviceType = advice.type;
  const size_t adviceBytes = typeSize(adviceType);

  // Match model inputs to header features.
  std::unique_ptr<mlgo_model::Model> model = std::make_unique<mlgo_model::Model>();
  for (int i = 0; i < model->num_args(); ++i)
    std::memset(model->arg_data(i), 0, model->arg_size(i));
  struct Copy { size_t offset, bytes; void *dst; };
  std::vector<Copy> copies;
  std::string diff;
  std::map<std::string, const Feature *> byName;
  for (const auto &f : feats) byName[f.name] = &f;
  for (const auto &in : mlgo_model::kInputs) {
    auto it = byName.find(in.name);
    if (it == byName.end()) {
      if (!isBookkeeping(in.name))
        diff += std::string("\n  model input '") + in.name + "' is not sent by the compiler";
      continue;
    }
    const Feature &f = *it->second;
    if (f.type != in.type || f.elements != in.elements) {
      diff += "\n  feature '" + f.name + "': compiler sends " + f.type + " x" +
              std::to_string(f.elements) + ", model expects " + in.type + " x" +
              std::to_string(in.elements);
      continue;
    }
    int arg = model->LookupArgIndex(std::string("feed_") + in.name);
    if (arg < 0) {
      diff += std::string("\n  compiled model has no argument feed_") + in.name;
      continue;
    }
    copies.push_back({f.offset, f.bytes, model->arg_data(arg)});
  }
  for (const auto &f : feats) {
    bool used = false;
    for (const auto &in : mlgo_model::kInputs) used |= f.name == in.name;
    // The heuristic's answer is extra information the model may ignore.
    if (!used && f.name != "inlining_default")
      diff += "\n  compiler feature '" + f.name + "' is not an input of the model";
  }
  if (!diff.empty()) {
    std::fprintf(stderr,
                 "advisor_server: the model's feature list does not match the compiler's "
                 "(%s.out header):%s\n",
                 base.c_str(), diff.c_str());
    return 2;
  }
  const Feature *mask = nullptr;
  auto mit = byName.find("mask");
  if (mit != byName.end() && std::string(mlgo_model::kProblem) == "regalloc_eviction")
    mask = mit->second;

  std::vector<char> obs(obsBytes);
  std::vector<char> scoreBuf(hasScore ? score.bytes : 0);
  std::string context;
  uint64_t decisions = 0, corrections = 0;
  double modelSeconds = 0;
  while (rd.line(line)) {
    if (line.empty()) continue;
    uint64_t at = rd.offset();
    Json rec;
    if (!JsonParser(line).parse(rec, err)) {
      std::fprintf(stderr, "advisor_server: bad record line before byte %llu: %s\n",
                   static_cast<unsigned long long>(at), err.c_str());
      return 1;
    }
    if (const Json *c = rec.get("context")) {
      context = c->str;
      continue;
    }
    if (const Json *o = rec.get("outcome")) {
      (void)o;
      if (!hasScore || !rd.exact(scoreBuf.data(), scoreBuf.size())) {
        std::fprintf(stderr, "advisor_server: outcome record without score bytes at %llu\n",
                     static_cast<unsigned long long>(at));
        return 1;
      }
      char nl;
      rd.exact(&nl, 1);
      continue;
    }
    const Json *o = rec.get("observation");
    if (!o) {
      std::fprintf(stderr, "advisor_server: unknown record '%s' at byte %llu\n", line.c_str(),
                   static_cast<unsigned long long>(at));
      return 1;
    }
    char nl = 0;
    if (!rd.exact(obs.data(), obs.size()) || !rd.exact(&nl, 1) || nl != '\n') {
      std::fprintf(stderr, "advisor_server: truncated observation %lld at byte %llu\n",
                   static_cast<long long>(o->num), static_cast<unsigned long long>(at));
      return 1;
    }
    for (const auto &c : copies) std::memcpy(c.dst, obs.data() + c.offset, c.bytes);
    auto t0 = std::chrono::steady_clock::now();
    if (!model->Run()) {
      std::fprintf(stderr, "advisor_server: model evaluation failed: %s\n",
                   model->error_msg().c_str());
      return 1;
    }
    modelSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const void *out = model->result_data(0);
    const std::string outType = mlgo_model::kOutput.type;
    bool corrected = false;
    double decision;
    if (mask) {
      std::vector<int64_t> m(mask->elements);
      std::memcpy(m.data(), obs.data() + mask->offset, mask->bytes);
      const int64_t n = mask->elements;
      int64_t idx;
      if (mlgo_model::kOutput.elements == n) {
        // Per-column scores: best valid column.
        idx = -1;
        for (int64_t k = 0; k < n; ++k)
          if (m[k] == 1 && (idx < 0 || outputAsDouble(out, outType, k) >
                                           outputAsDouble(out, outType, idx)))
            idx = k;
        if (idx < 0) idx = n - 1;
      } else {
        idx = static_cast<int64_t>(outputAsDouble(out, outType, 0));
        if (idx < 0 || idx >= n || m[idx] != 1) {
          corrected = true;
          int64_t last = n - 1;
          if (m[last] == 1) {
            idx = last;
          } else {
            idx = -1;
            for (int64_t k = 0; k < n && idx < 0; ++k)
              if (m[k] == 1) idx = k;
            if (idx < 0) idx = last;
          }
        }
      }
      decision = static_cast<double>(idx);
    } else {
      decision = outputAsDouble(out, outType, 0);
      if (!std::isfinite(decision)) {
        decision = 0;
        corrected = true;
      }
    }
    corrections += corrected;
    char bytes[8];
    if (adviceType == "int64_t") {
      int64_t v = static_cast<int64_t>(decision);
      std::memcpy(bytes, &v, 8);
    } else if (adviceType == "float") {
      float v = static_cast<float>(decision);
      std::memcpy(bytes, &v, 4);
    } else if (adviceType == "double") {
      std::memcpy(bytes, &decision, 8);
    } else if (adviceType == "int32_t") {
      int32_t v = static_cast<int32_t>(decision);
      std::memcpy(bytes, &v, 4);
    } else {
      std::fprintf(stderr, "advisor_server: unsupported advice type %s\n", adviceType.c_str());
      return 1;
    }
    if (!writeAll(inFd, bytes, adviceBytes)) {
      std::fprintf(stderr, "advisor_server: cannot write decision to %s.in: %s\n", base.c_str(),
                   std::strerror(errno));
      return 1;
    }
    if (log)
      std::fprintf(log, "%s\t%lld\t%.9g\t%d\n", context.c_str(), static_cast<long long>(o->num),
                   decision, corrected ? 1 : 0);
    ++decisions;
  }
  if (log) std::fclose(log);
  if (record) std::fclose(record);
  if (!quiet)
    std::fprintf(stderr,
                 "advisor_server: %llu decisions, %llu corrections, model time %.3f ms "
                 "(%.2f us/decision)\n",
                 static_cast<unsigned long long>(decisions),
                 static_cast<unsigned long long>(corrections), modelSeconds * 1e3,
                 decisions ? modelSeconds * 1e6 / decisions : 0.0);
  return 0;
}
