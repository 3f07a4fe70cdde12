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
//
// This file is the command line and the channel's files; the protocol and the model glue
// are server.cc's, the stream parsing //cc/log_reader's.
#include "mlgo_model.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "cc/advisor_server/server.h"

namespace {

int OpenFifo(const std::string& path, int flags) {
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

int Usage() {
  std::fprintf(stderr,
               "usage: advisor_server --channel_base=BASE [--log=PATH] [--record=PATH]\n"
               "  serves LLVM's interactive channel BASE.out -> BASE.in with the compiled "
               "%s policy\n",
               mlgo_model::kProblem);
  return 64;
}

}  // namespace

int main(int argc, char** argv) {
  mlgo::advisor::Channel ch;
  std::string logPath, recordPath;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](const char* flag) -> const char* {
      size_t n = std::strlen(flag);
      if (a.compare(0, n, flag) == 0 && a.size() > n && a[n] == '=') return argv[i] + n + 1;
      return nullptr;
    };
    if (const char* v = val("--channel_base")) ch.base = v;
    else if (const char* v = val("--log")) logPath = v;
    else if (const char* v = val("--record")) recordPath = v;
    else if (a == "--quiet") ch.quiet = true;
    else if (a == "--print_spec") {
      for (const auto& in : mlgo_model::kInputs)
        std::printf("%s %s %lld\n", in.name, in.type, static_cast<long long>(in.elements));
      std::printf("-> %s %s %lld\n", mlgo_model::kOutput.name, mlgo_model::kOutput.type,
                  static_cast<long long>(mlgo_model::kOutput.elements));
      return 0;
    } else return Usage();
  }
  if (ch.base.empty()) return Usage();

  // Opening BASE.in read-write never blocks (whatever order the compiler opens the two
  // files in); BASE.out blocks until the compiler opens it for writing.
  ch.in_fd = OpenFifo(ch.base + ".in", O_RDWR);
  if (ch.in_fd >= 0) ch.out_fd = OpenFifo(ch.base + ".out", O_RDONLY);
  if (ch.in_fd < 0 || ch.out_fd < 0) return 1;
  ch.record = recordPath.empty() ? nullptr : std::fopen(recordPath.c_str(), "wb");
  ch.log = logPath.empty() ? nullptr : std::fopen(logPath.c_str(), "w");
  return mlgo::advisor::Serve(ch);
}
