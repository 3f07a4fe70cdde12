"""Train a register-allocation policy end to end (README command 1): default corpus at
-O2, prepared once for llc, default trace, behavioral cloning, PPO, held-out evaluation.
The same shared pipeline trains any problem (see mlgo/training/pipeline.py).

  bazel run //tools:train_regalloc -- [--problem=regalloc_eviction|regalloc_priority]
      [--corpus=DIR] [--output=DIR] [--time_budget=SECONDS] [--gin_bindings=...]
"""
import sys

from mlgo.training import cli

if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()  # nothing the tool or TensorFlow writes is left in /tmp
  sys.exit(cli.pipeline_main())
