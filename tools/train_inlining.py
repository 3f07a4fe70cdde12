"""Train an inlining-for-size policy with PPO, the policy in clang's loop.

  bazel run //tools:train_inlining -- --corpus=DIR --output=DIR [--warmstart=POLICY_DIR] \
      [--trace=DIR] [--gin_files=configs/inlining.gin] [--gin_bindings=PPOConfig.jobs=2] \
      [--iterations=N] [--time_budget=SECONDS]
Killing it (even with SIGKILL) and running the same command again resumes from the last
finished iteration. --output gets: policy/ (latest), policies/iter-N/, checkpoint/,
tensorboard/, log.jsonl. With no --corpus, the default corpus is used (built once).
"""
import argparse
import sys

from mlgo.util.cli import repo_root, user_path

DEFAULT_GIN = "configs/inlining.gin"


def parse_and_bind_gin(gin_files, gin_bindings):
  import gin  # pylint: disable=import-outside-toplevel
  from mlgo.training import ppo  # pylint: disable=import-outside-toplevel,unused-import
  files = []
  for g in gin_files:
    p = user_path(g)
    if not p.exists() and repo_root() is not None and (repo_root() / g).exists():
      p = repo_root() / g
    if not p.exists():
      raise SystemExit(f"gin file {g} not found")
    files.append(str(p))
  if repo_root() is not None:
    gin.add_config_file_search_path(str(repo_root()))
    gin.add_config_file_search_path(str(repo_root() / "configs"))
  gin.parse_config_files_and_bindings(files, gin_bindings)


def main(argv=None, problem="inlining", default_gin=DEFAULT_GIN):
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--corpus", help="corpus dir (default: the default corpus)")
  ap.add_argument("--output", required=True)
  ap.add_argument("--warmstart", help="policy dir to start from (e.g. from train_bc)")
  ap.add_argument("--trace", help="default trace (normalization + baselines)")
  ap.add_argument("--gin_files", action="append", default=None)
  ap.add_argument("--gin_bindings", action="append", default=[])
  ap.add_argument("--iterations", type=int, help="train until this iteration count")
  ap.add_argument("--time_budget", type=float, help="stop after about this many seconds")
  a = ap.parse_args(argv)
  gin_files = a.gin_files if a.gin_files is not None else [default_gin]
  parse_and_bind_gin(gin_files, a.gin_bindings)
  from mlgo.training import ppo  # pylint: disable=import-outside-toplevel
  if a.corpus:
    corpus_dir = user_path(a.corpus)
  else:
    from mlgo import corpus  # pylint: disable=import-outside-toplevel
    corpus_dir = corpus.default_corpus()
  trainer = ppo.Trainer(corpus_dir, user_path(a.output), problem_name=problem,
                        warmstart=user_path(a.warmstart) if a.warmstart else None,
                        trace=user_path(a.trace) if a.trace else None)
  import gin  # pylint: disable=import-outside-toplevel
  with open(user_path(a.output) / "operative_config.gin", "w") as f:
    f.write(gin.operative_config_str())
  recs = trainer.run(a.iterations, a.time_budget)
  print(f"trained to iteration {trainer.state['iteration']}; latest policy: "
        f"{user_path(a.output) / 'policy'}")
  return 0 if recs or trainer.state["iteration"] > 0 else 1


if __name__ == "__main__":
  sys.exit(main())
