// The advisor server's serving loop (server.cc), apart from its command line (main.cc):
// main.cc opens the channel and the output files, Serve() speaks the protocol.
#ifndef MLGO_CC_ADVISOR_SERVER_SERVER_H_
#define MLGO_CC_ADVISOR_SERVER_SERVER_H_

#include <cstdio>
#include <string>

namespace mlgo::advisor {

struct Channel {
  std::string base;        // BASE, as messages name BASE.out / BASE.in
  int out_fd = -1;         // BASE.out: the compiler's observations
  int in_fd = -1;          // BASE.in: our decisions
  FILE* record = nullptr;  // --record: gets every byte read from BASE.out
  FILE* log = nullptr;     // --log: one line per decision
  bool quiet = false;      // no summary line on stderr
};

// Answers every observation until the compiler closes BASE.out. Returns the exit status:
// 0 done, 1 malformed stream or failed model run / write, 2 the model's inputs do not
// match the compiler's features (reported before any answer). On a clean end it closes
// ch.log and ch.record before printing its summary; on other paths exit() flushes them.
int Serve(const Channel& ch);

}  // namespace mlgo::advisor

#endif  // MLGO_CC_ADVISOR_SERVER_SERVER_H_
