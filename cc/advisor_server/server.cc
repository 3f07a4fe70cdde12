// The advisor server's serving loop: LLVM's interactive-channel stream in, read with
// //cc/log_reader (the project's tested reader of the training-log format, so the server
// accepts exactly what the Python collector does), the AOT-compiled model of
// mlgo_model.h in the middle, raw decisions out. The command line is main.cc's job.
#include "cc/advisor_server/server.h"

#include <errno.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cc/log_reader/log_reader.h"
#include "mlgo_model.h"

namespace mlgo::advisor {
namespace {

namespace lr = ::mlgo::logreader;

// BASE.out by read(2), copying what it reads to --record. A read error ends the stream
// like EOF does: either way the compiler is gone.
class ChannelSource : public lr::Source {
 public:
  ChannelSource(int fd, FILE* record) : fd_(fd), record_(record) {}
  size_t Read(char* buf, size_t max) override {
    ssize_t r;
    do {
      r = ::read(fd_, buf, max);
    } while (r < 0 && errno == EINTR);
    if (r <= 0) return 0;
    if (record_) std::fwrite(buf, 1, r, record_);
    total_ += r;
    return static_cast<size_t>(r);
  }
  uint64_t total() const { return total_; }

 private:
  int fd_;
  FILE* record_;
  uint64_t total_ = 0;
};

// A header feature and where its bytes sit in one observation record.
struct Feature {
  std::string name, type;
  int64_t elements = 1;
  size_t bytes = 0;
  size_t offset = 0;
};

std::vector<Feature> Layout(const lr::Header& h) {
  std::vector<Feature> feats;
  size_t offset = 0;
  for (const lr::TensorSpec& s : h.features) {
    feats.push_back({s.name, lr::DTypeName(s.dtype), static_cast<int64_t>(s.elements),
                     static_cast<size_t>(s.nbytes), offset});
    offset += s.nbytes;
  }
  return feats;
}

bool IsBookkeeping(const std::string& n) {
  for (const char* b : mlgo_model::kBookkeeping)
    if (n == b) return true;
  return false;
}

// One model input's bytes in an observation record, and the model argument they go to.
struct Copy {
  size_t offset, bytes;
  void* dst;
};

// Matches the model's inputs to the compiler's features by name, type and element count.
// Every difference is appended to *diff, one "\n  ..." line each.
std::vector<Copy> MatchInputs(const std::vector<Feature>& feats,
                              const std::map<std::string, const Feature*>& by_name,
                              mlgo_model::Model& model, std::string* diff) {
  std::vector<Copy> copies;
  for (const auto& in : mlgo_model::kInputs) {
    auto it = by_name.find(in.name);
    if (it == by_name.end()) {
      if (!IsBookkeeping(in.name))
        *diff += std::string("\n  model input '") + in.name + "' is not sent by the compiler";
      continue;
    }
    const Feature& f = *it->second;
    if (f.type != in.type || f.elements != in.elements) {
      *diff += "\n  feature '" + f.name + "': compiler sends " + f.type + " x" +
               std::to_string(f.elements) + ", model expects " + in.type + " x" +
               std::to_string(in.elements);
      continue;
    }
    int arg = model.LookupArgIndex(std::string("feed_") + in.name);
    if (arg < 0) {
      *diff += std::string("\n  compiled model has no argument feed_") + in.name;
      continue;
    }
    copies.push_back({f.offset, f.bytes, model.arg_data(arg)});
  }
  for (const auto& f : feats) {
    bool used = false;
    for (const auto& in : mlgo_model::kInputs) used |= f.name == in.name;
    // The heuristic's answer is extra information the model may ignore.
    if (!used && f.name != "inlining_default")
      *diff += "\n  compiler feature '" + f.name + "' is not an input of the model";
  }
  return copies;
}

double OutputAsDouble(const void* p, const std::string& t, int64_t i) {
  if (t == "int64_t") return static_cast<const int64_t*>(p)[i];
  if (t == "int32_t") return static_cast<const int32_t*>(p)[i];
  if (t == "float") return static_cast<const float*>(p)[i];
  if (t == "double") return static_cast<const double*>(p)[i];
  if (t == "int8_t") return static_cast<const int8_t*>(p)[i];
  return static_cast<const uint8_t*>(p)[i];
}

// The answer to one observation from the model's output. With an eviction mask the answer
// must be a column whose mask is 1 (the Python collector's rule: 32 = no eviction if
// allowed, else the lowest valid column); a non-finite answer becomes 0. *corrected says
// whether the model's own answer was changed.
double Decide(const void* out, const char* obs, const Feature* mask, bool* corrected) {
  const std::string outType = mlgo_model::kOutput.type;
  *corrected = false;
  if (!mask) {
    double decision = OutputAsDouble(out, outType, 0);
    if (!std::isfinite(decision)) {
      decision = 0;
      *corrected = true;
    }
    return decision;
  }
  std::vector<int64_t> m(mask->elements);
  std::memcpy(m.data(), obs + mask->offset, mask->bytes);
  const int64_t n = mask->elements;
  int64_t idx;
  if (mlgo_model::kOutput.elements == n) {
    // Per-column scores: best valid column.
    idx = -1;
    for (int64_t k = 0; k < n; ++k)
      if (m[k] == 1 &&
          (idx < 0 || OutputAsDouble(out, outType, k) > OutputAsDouble(out, outType, idx)))
        idx = k;
    if (idx < 0) idx = n - 1;
  } else {
    idx = static_cast<int64_t>(OutputAsDouble(out, outType, 0));
    if (idx < 0 || idx >= n || m[idx] != 1) {
      *corrected = true;
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
  return static_cast<double>(idx);
}

// `decision` as the raw bytes of the advice type; returns their count, 0 for a type the
// server cannot write.
size_t Encode(double decision, const std::string& type, char bytes[8]) {
  if (type == "int64_t") {
    int64_t v = static_cast<int64_t>(decision);
    std::memcpy(bytes, &v, 8);
    return 8;
  }
  if (type == "float") {
    float v = static_cast<float>(decision);
    std::memcpy(bytes, &v, 4);
    return 4;
  }
  if (type == "double") {
    std::memcpy(bytes, &decision, 8);
    return 8;
  }
  if (type == "int32_t") {
    int32_t v = static_cast<int32_t>(decision);
    std::memcpy(bytes, &v, 4);
    return 4;
  }
  return 0;
}

bool WriteAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= w;
  }
  return true;
}

// If `problem` (a log_reader message) is about the tensor bytes of record `kind`
// ("stream ends inside observation 3 data ..." or "observation 3: 12 bytes of tensor data
// are followed by ..."), sets *index to the record's number.
bool DataProblem(const std::string& problem, const std::string& kind, long long* index) {
  static const std::string kEnds = "stream ends inside ";
  size_t i = problem.compare(0, kEnds.size(), kEnds) == 0 ? kEnds.size() : 0;
  if (problem.compare(i, kind.size() + 1, kind + " ") != 0) return false;
  i += kind.size() + 1;
  size_t digits = 0;
  long long v = 0;
  while (i < problem.size() && problem[i] >= '0' && problem[i] <= '9' && digits < 19) {
    v = v * 10 + (problem[i++] - '0');
    ++digits;
  }
  if (!digits || i >= problem.size() || (problem[i] != ' ' && problem[i] != ':')) return false;
  *index = v;
  return true;
}

// A malformed record, in the words this server has always used (users and tests look for
// "truncated observation N"). `at` is where the reader stopped: after the record's line.
int RecordError(const lr::FormatError& e, uint64_t at) {
  const unsigned long long byte = at;
  long long index;
  if (DataProblem(e.problem(), "observation", &index)) {
    std::fprintf(stderr, "advisor_server: truncated observation %lld at byte %llu\n", index,
                 byte);
  } else if (DataProblem(e.problem(), "outcome", &index) ||
             e.problem().rfind("outcome in a stream whose header has no score", 0) == 0) {
    std::fprintf(stderr, "advisor_server: outcome record without score bytes at %llu\n", byte);
  } else {
    std::fprintf(stderr, "advisor_server: bad record line before byte %llu: %s\n", byte,
                 e.problem().c_str());
  }
  return 1;
}

}  // namespace

int Serve(const Channel& ch) {
  auto owned = std::make_unique<ChannelSource>(ch.out_fd, ch.record);
  const ChannelSource* source = owned.get();
  lr::Reader reader(std::move(owned));

  const lr::Header* header;
  try {
    header = &reader.header();
  } catch (const lr::FormatError& e) {
    if (source->total() == 0) {
      // The compiler closed the channel without using it (no decision to make in this
      // module). Whether the compile succeeded is the compiler's exit status to tell.
      if (!ch.quiet)
        std::fprintf(stderr, "advisor_server: 0 decisions (%s.out closed before any header)\n",
                     ch.base.c_str());
      return 0;
    }
    std::fprintf(stderr, "advisor_server: bad header line at byte 0 of %s.out: %s\n",
                 ch.base.c_str(), e.problem().c_str());
    return 1;
  }
  const std::vector<Feature> feats = Layout(*header);
  const std::string adviceType =
      header->advice ? lr::DTypeName(header->advice->dtype) : mlgo_model::kOutput.type;

  // Match model inputs to header features.
  std::unique_ptr<mlgo_model::Model> model = std::make_unique<mlgo_model::Model>();
  for (int i = 0; i < model->num_args(); ++i)
    std::memset(model->arg_data(i), 0, model->arg_size(i));
  std::map<std::string, const Feature*> byName;
  for (const auto& f : feats) byName[f.name] = &f;
  std::string diff;
  const std::vector<Copy> copies = MatchInputs(feats, byName, *model, &diff);
  if (!diff.empty()) {
    std::fprintf(stderr,
                 "advisor_server: the model's feature list does not match the compiler's "
                 "(%s.out header):%s\n",
                 ch.base.c_str(), diff.c_str());
    return 2;
  }
  const Feature* mask = nullptr;
  auto mit = byName.find("mask");
  if (mit != byName.end() && std::string(mlgo_model::kProblem) == "regalloc_eviction")
    mask = mit->second;

  std::string context;
  uint64_t decisions = 0, corrections = 0;
  double modelSeconds = 0;
  while (true) {
    const lr::Event* ev;
    try {
      ev = &reader.Next();
    } catch (const lr::FormatError& e) {
      return RecordError(e, reader.offset());
    }
    if (ev->kind == lr::Event::Kind::kEnd) break;
    if (ev->kind == lr::Event::Kind::kContext) {
      context = ev->context;
      continue;
    }
    if (ev->kind == lr::Event::Kind::kOutcome) continue;  // a reward: nothing to answer

    const char* obs = ev->data;
    for (const auto& c : copies) std::memcpy(c.dst, obs + c.offset, c.bytes);
    auto t0 = std::chrono::steady_clock::now();
    if (!model->Run()) {
      std::fprintf(stderr, "advisor_server: model evaluation failed: %s\n",
                   model->error_msg().c_str());
      return 1;
    }
    modelSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    bool corrected;
    const double decision = Decide(model->result_data(0), obs, mask, &corrected);
    corrections += corrected;
    char bytes[8];
    const size_t n = Encode(decision, adviceType, bytes);
    if (!n) {
      std::fprintf(stderr, "advisor_server: unsupported advice type %s\n", adviceType.c_str());
      return 1;
    }
    if (!WriteAll(ch.in_fd, bytes, n)) {
      std::fprintf(stderr, "advisor_server: cannot write decision to %s.in: %s\n",
                   ch.base.c_str(), std::strerror(errno));
      return 1;
    }
    if (ch.log)
      std::fprintf(ch.log, "%s\t%lld\t%.9g\t%d\n", context.c_str(),
                   static_cast<long long>(ev->index), decision, corrected ? 1 : 0);
    ++decisions;
  }
  if (ch.log) std::fclose(ch.log);
  if (ch.record) std::fclose(ch.record);
  if (!ch.quiet)
    std::fprintf(stderr,
                 "advisor_server: %llu decisions, %llu corrections, model time %.3f ms "
                 "(%.2f us/decision)\n",
                 static_cast<unsigned long long>(decisions),
                 static_cast<unsigned long long>(corrections), modelSeconds * 1e3,
                 decisions ? modelSeconds * 1e6 / decisions : 0.0);
  return 0;
}

}  // namespace mlgo::advisor
