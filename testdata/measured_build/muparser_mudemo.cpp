// Project-written workload for muparser: parses each expression given on the command line
// (variables x, y, t), evaluates it over an N x N grid, and also re-parses it with a
// changing constant each row, so both the parser and the bytecode evaluator run. Prints
// one checksum per expression, so two builds can be compared by their output.
// usage: mudemo N EXPR...
#include <cstdio>
#include <cstdlib>
#include <string>
#include "muParser.h"

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 200;
  double x = 0, y = 0, t = 0;
  for (int e = 2; e < argc; e++) {
    mu::Parser p;
    p.DefineVar("x", &x);
    p.DefineVar("y", &y);
    p.DefineVar("t", &t);
    double sum = 0;
    try {
      for (int i = 0; i < n; i++) {
        t = i * 0.5;
        p.SetExpr(std::string(argv[e]) + " + " + std::to_string(i % 7) + "*t");
        for (int j = 0; j < n; j++) {
          x = (i - n / 2) * 0.01;
          y = (j - n / 2) * 0.013;
          sum += p.Eval();
        }
      }
    } catch (mu::Parser::exception_type &err) {
      std::printf("error: %s\n", err.GetMsg().c_str());
      return 1;
    }
    std::printf("%d %.9g\n", e - 1, sum);
  }
  return 0;
}
