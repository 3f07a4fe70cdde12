// floor_responder --channel_base=BASE
//     (--answer_feature=NAME | --answer_constant=N | --eviction_default)
//
// Answers every observation on BASE.out/BASE.in with the value of one scalar feature
// (e.g. inlining_default: the compiler's own decision, so the object equals the plain
// compile), with a constant, or (eviction) with the environment's default-equivalent
// column (mlgo.problems.regalloc.eviction_default, same tie-breaking), reading the
// stream with the project's native reader and doing nothing else. Timing a compile with it in the loop gives the floor that any
// policy server, in any language, adds to: the compiler-side cost of interactive mode.
// Prints "<decisions> decisions" to stderr at the end. Exit status 1 on any error.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "cc/log_reader/log_reader.h"

namespace {

int Fail(const std::string& what) {
  std::fprintf(stderr, "floor_responder: %s\n", what.c_str());
  return 1;
}

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Mirrors mlgo.problems.regalloc.eviction_default: among masked-valid interference
// columns the fewest broken hints, then the lowest use/def density, then the lowest
// index (NaN sorting last, as numpy does); the candidate column (evict nothing) when it
// is valid and no denser.
struct Eviction {
  static constexpr int kColumns = 33, kCandidate = 32;
  uint64_t mask = 0, hints = 0, density = 0;
  std::string missing;

  bool Bind(const mlgo::logreader::Header& h) {
    bool m = false, b = false, d = false;
    uint64_t off = 0;
    using mlgo::logreader::DType;
    for (const auto& f : h.features) {
      if (f.elements == kColumns) {
        if (f.name == "mask" && f.dtype == DType::kInt64) mask = off, m = true;
        if (f.name == "nr_broken_hints" && f.dtype == DType::kFloat) hints = off, b = true;
        if (f.name == "use_def_density" && f.dtype == DType::kFloat) density = off, d = true;
      }
      off += f.nbytes;
    }
    if (!m) missing += " mask";
    if (!b) missing += " nr_broken_hints";
    if (!d) missing += " use_def_density";
    return m && b && d;
  }

  // numpy's sort order: NaN after every number.
  static bool Less(float a, float b) { return !std::isnan(a) && (std::isnan(b) || a < b); }

  long long Choose(const char* data) const {
    int64_t mk[kColumns];
    float hi[kColumns], de[kColumns];
    std::memcpy(mk, data + mask, sizeof mk);
    std::memcpy(hi, data + hints, sizeof hi);
    std::memcpy(de, data + density, sizeof de);
    int best = -1;
    for (int i = 0; i < kCandidate; ++i) {
      if (!mk[i]) continue;
      if (best < 0 || Less(hi[i], hi[best]) || (hi[i] == hi[best] && Less(de[i], de[best])))
        best = i;
    }
    if (best < 0) {
      if (mk[kCandidate]) return kCandidate;
      for (int i = 0; i < kColumns; ++i)
        if (mk[i]) return i;
      return kCandidate;
    }
    if (mk[kCandidate] && de[best] >= de[kCandidate]) return kCandidate;
    return best;
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string base, feature;
  bool have_constant = false, eviction = false;
  long long constant = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      size_t n = std::strlen(flag);
      return a.compare(0, n, flag) == 0 ? argv[i] + n : nullptr;
    };
    if (const char* v = value("--channel_base=")) base = v;
    else if (const char* v = value("--answer_feature=")) feature = v;
    else if (const char* v = value("--answer_constant=")) {
      have_constant = true;
      constant = std::strtoll(v, nullptr, 10);
    } else if (a == "--eviction_default") {
      eviction = true;
    } else {
      return Fail("unknown argument " + a);
    }
  }
  if (base.empty() || (!feature.empty()) + have_constant + eviction != 1)
    return Fail("usage: --channel_base=BASE (--answer_feature=NAME | --answer_constant=N | "
                "--eviction_default)");

  // The compiler opens BASE.out for writing and BASE.in for reading, in an order we do
  // not rely on: open our read end without blocking first, then the write end.
  int rfd = open((base + ".out").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (rfd < 0) return Fail(base + ".out: " + std::strerror(errno));
  int wfd = open((base + ".in").c_str(), O_WRONLY | O_CLOEXEC);
  if (wfd < 0) return Fail(base + ".in: " + std::strerror(errno));
  // Until the compiler has opened its write end, read() would report end of stream:
  // wait for the first bytes (the header) before reading blocking.
  pollfd p{rfd, POLLIN, 0};
  while (poll(&p, 1, -1) < 0 && errno == EINTR) {
  }
  fcntl(rfd, F_SETFL, fcntl(rfd, F_GETFL) & ~O_NONBLOCK);

  long long decisions = 0;
  try {
    mlgo::logreader::Reader reader(std::make_unique<mlgo::logreader::FdSource>(rfd, true));
    const mlgo::logreader::Header& h = reader.header();
    if (!h.advice) return Fail("the header names no advice tensor");
    const mlgo::logreader::DType out = h.advice->dtype;
    if (h.advice->elements != 1) return Fail("advice is not a scalar");
    uint64_t offset = 0;
    mlgo::logreader::DType in = mlgo::logreader::DType::kInt64;
    bool found = false;
    for (const auto& f : h.features) {
      if (f.name == feature) {
        found = true;
        in = f.dtype;
        if (f.elements != 1) return Fail("feature " + feature + " is not a scalar");
        break;
      }
      offset += f.nbytes;
    }
    if (!feature.empty() && !found) return Fail("the compiler sends no feature " + feature);
    Eviction ev;
    if (eviction && !ev.Bind(h)) return Fail("not an eviction channel: " + ev.missing);
    if (!feature.empty() && in != mlgo::logreader::DType::kInt64)
      return Fail("feature " + feature + " is not int64");
    for (;;) {
      const mlgo::logreader::Event& e = reader.Next();
      if (e.kind == mlgo::logreader::Event::Kind::kEnd) break;
      if (e.kind != mlgo::logreader::Event::Kind::kObservation) continue;
      long long v = constant;
      if (eviction) {
        v = ev.Choose(e.data);
      } else if (!feature.empty()) {
        int64_t x;
        std::memcpy(&x, e.data + offset, sizeof x);
        v = x;
      }
      char buf[8];
      size_t n;
      if (out == mlgo::logreader::DType::kInt64) {
        int64_t a = v;
        std::memcpy(buf, &a, n = sizeof a);
      } else if (out == mlgo::logreader::DType::kFloat) {
        float a = static_cast<float>(v);
        std::memcpy(buf, &a, n = sizeof a);
      } else {
        return Fail(std::string("unsupported advice type ") + mlgo::logreader::DTypeName(out));
      }
      if (!WriteAll(wfd, buf, n)) return Fail(base + ".in: write failed");
      ++decisions;
    }
  } catch (const std::exception& e) {
    return Fail(e.what());
  }
  close(wfd);
  std::fprintf(stderr, "%lld decisions\n", decisions);
  return 0;
}
