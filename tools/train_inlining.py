"""Train an inlining-for-size policy with PPO, the policy in clang's loop.

  bazel run //tools:train_inlining -- --corpus=DIR --output=DIR [--warmstart=POLICY_DIR] \
      [--trace=DIR] [--gin_files=configs/inlining.gin] [--gin_bindings=PPOConfig.jobs=2] \
      [--iterations=N] [--time_budget=SECONDS]
Killing it (even with SIGKILL) and running the same command again resumes from the last
finished iteration. See mlgo/training/cli.py for the outputs.
"""
import sys

from mlgo.training.cli import train_main

if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()  # nothing the tool or TensorFlow writes is left in /tmp
  sys.exit(train_main(problem="inlining"))
