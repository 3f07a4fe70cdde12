"""Train a register-allocation policy end to end (see mlgo/regalloc/cli.py for flags).

  bazel run //tools:train_regalloc -- [--problem=regalloc_eviction|regalloc_priority]
      [--corpus=DIR] [--output=DIR] [--gin_bindings=...]
"""
import sys

from mlgo.regalloc import cli

if __name__ == "__main__":
  sys.exit(cli.train_main())
