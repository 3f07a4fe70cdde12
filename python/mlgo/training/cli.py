"""Command lines of training: the PPO trainer (`train_main`, tools/train_inlining.py)
and the end-to-end pipeline (`pipeline_main`, tools/train_regalloc.py), for any problem.

Also runnable as `python -m mlgo.training.cli --problem=... --corpus=... --output=...`.
"""
import argparse
import importlib.util  # noqa: F401  gin resolves includes through it but does not import it
import logging
import os
import sys

from mlgo.util.cli import repo_root, user_path
from mlgo import workers

USAGE = """Train a policy with PPO, the policy in the compiler's loop.

  --corpus=DIR --output=DIR [--warmstart=POLICY_DIR] [--trace=DIR]
  [--gin_files=configs/X.gin] [--gin_bindings=PPOConfig.jobs=2] [--iterations=N]
  [--time_budget=SECONDS]
Without --gin_files the problem's own gin file is read (configs/PROBLEM.gin, or its base
problem's). Killing it (even with SIGKILL) and running the same command again resumes
from the last finished iteration. --output gets: policy/ (latest), policies/iter-N/,
checkpoint/, tensorboard/, log.jsonl, operative_config.gin. Without --corpus the default
corpus is used (built once).
"""


def parse_and_bind_gin(gin_files, gin_bindings):
  import gin  # pylint: disable=import-outside-toplevel
  from mlgo.training import ppo  # pylint: disable=import-outside-toplevel,unused-import
  files = []
  root = repo_root()
  if root is not None:
    gin.add_config_file_search_path(str(root))
    gin.add_config_file_search_path(str(root / "configs"))
  for g in gin_files:
    p = user_path(g)
    if not p.exists() and root is not None and (root / g).exists():
      p = root / g
    if not p.exists():
      raise SystemExit(f"gin file {g} not found (looked in the working dir and the repo)")
    gin.add_config_file_search_path(str(p.parent))
    files.append(str(p))
  # Not finalized: tf-agents modules imported later register configurables too.
  # gin tries every search path for an include and logs "ERROR ... Path not found" for
  # each miss before the hit: noise that reads like a failure, so it is filtered here.
  noise = _GinSearchMisses()
  logging.getLogger().addFilter(noise)
  try:
    gin.parse_config_files_and_bindings(files, gin_bindings, finalize_config=False)
  finally:
    logging.getLogger().removeFilter(noise)


class _GinSearchMisses(logging.Filter):

  def filter(self, record):
    return not (record.name == "root" and str(record.msg).startswith("Path not found")
                and record.pathname.endswith(os.path.join("gin", "resource_reader.py")))


def _problem_gin(problem_name: str) -> list:
  """The problem's own gin file (mlgo.problems.gin_file), as a --gin_files default; says
  which one, or that there is none (the code's defaults then hold, e.g. a full-size
  budget), so a run never trains on other settings than the user thinks."""
  from mlgo.problems import gin_file  # pylint: disable=import-outside-toplevel
  path = gin_file(problem_name)
  if path is None:
    print(f"gin: no gin file for {problem_name} (configs/{problem_name}.gin or beside its "
          "problem file); the configs' code defaults apply", file=sys.stderr)
    return []
  print(f"gin: {path}", file=sys.stderr)
  return [str(path)]


def train_main(argv=None, problem: str | None = None):
  ap = argparse.ArgumentParser(description=USAGE,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--problem", default=problem or "inlining")
  ap.add_argument("--corpus", help="corpus dir (default: the default corpus)")
  ap.add_argument("--output", required=True)
  ap.add_argument("--warmstart", help="policy dir to start from (e.g. from train_bc)")
  ap.add_argument("--trace", help="default trace dir (normalization + baselines)")
  ap.add_argument("--gin_files", action="append", default=None)
  ap.add_argument("--gin_bindings", action="append", default=[])
  ap.add_argument("--iterations", type=int, help="train until this iteration count")
  ap.add_argument("--time_budget", type=float, help="stop after about this many seconds")
  workers.add_flags(ap)
  a = ap.parse_args(argv)
  workers.apply_flags(a)
  gin_files = a.gin_files if a.gin_files is not None else _problem_gin(a.problem)
  parse_and_bind_gin(gin_files, a.gin_bindings)
  import gin  # pylint: disable=import-outside-toplevel
  from mlgo.training import ppo  # pylint: disable=import-outside-toplevel
  from mlgo import corpus  # pylint: disable=import-outside-toplevel
  from mlgo.problems import get_problem  # pylint: disable=import-outside-toplevel
  corpus_dir = corpus.corpus_arg(a.corpus, get_problem(a.problem).corpus_opt)
  out = user_path(a.output)
  trainer = ppo.Trainer(corpus_dir, out, problem_name=a.problem,
                        warmstart=user_path(a.warmstart) if a.warmstart else None,
                        trace=user_path(a.trace) if a.trace else None)
  with open(out / "operative_config.gin", "w") as f:
    f.write(gin.operative_config_str())
  recs = trainer.run(a.iterations, a.time_budget)
  print(f"trained to iteration {trainer.state['iteration']}; latest policy: {out / 'policy'}")
  return 0 if recs or trainer.state["iteration"] > 0 else 1


PIPELINE_USAGE = """Train a policy end to end: corpus -> default trace -> behavioral
cloning -> PPO (tf-agents) -> held-out evaluation, for a fixed number of PPO iterations
(the same policy, bit for bit, however fast or loaded the machine, and after a resume)
or within a time budget.

  bazel run //tools:train_regalloc -- [--problem=regalloc_eviction|regalloc_priority|inlining]
      [--corpus=DIR] [--output=DIR] [--warmstart=POLICY_DIR]
      [--iterations=N | --time_budget=SECONDS]
      [--gin_files=configs/X.gin] [--gin_bindings=PPOConfig.jobs=2]
Without --corpus the default corpus is built once (at -O2 for the regalloc problems).
llc problems optimize the corpus once first (cached). Running the same command again
reuses finished steps and resumes PPO. Before the last line: the same policy on packages
it never saw (@unseen: total, median module, modules >1% worse, packages worse), and
with PipelineConfig.guarded_report the same for guarded compiles (per function the
better of the default and the policy; lines starting "guarded"). The last line is the
held-out summary:
  modules=N functions=F default_cost=C policy_cost=C change=+-X.XX% regressions=K
regalloc_priority is EXPERIMENTAL: its trained policies have so far been worse than
LLVM's default priority on the held-out split (see docs/regalloc.md).
"""


def pipeline_main(argv=None, problem: str = "regalloc_eviction"):
  ap = argparse.ArgumentParser(description=PIPELINE_USAGE,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  from mlgo.problems import problem_names  # pylint: disable=import-outside-toplevel
  ap.add_argument("--problem", default=problem, choices=problem_names(),
                  help="the decision to learn (default %(default)s; regalloc_priority is "
                       "experimental)")
  ap.add_argument("--corpus", help="corpus dir in the mlgo-utils format (default: the "
                  "default corpus, built once)")
  ap.add_argument("--output", help="output dir (default: ./mlgo_<problem>)")
  ap.add_argument("--warmstart", help="policy dir to start PPO from instead of BC")
  ap.add_argument("--iterations", type=int, help="PPO iterations (default from the gin "
                  "config); a fixed count gives the same policy however fast or loaded "
                  "the machine")
  ap.add_argument("--time_budget", type=float, help="total seconds for the run instead of "
                  "a fixed count: PPO runs as long as it allows (the policy then depends "
                  "on the machine's speed)")
  ap.add_argument("--gin_files", action="append", default=None)
  ap.add_argument("--gin_bindings", action="append", default=[])
  workers.add_flags(ap)
  a = ap.parse_args(argv)
  workers.apply_flags(a)
  gin_files = a.gin_files if a.gin_files is not None else _problem_gin(a.problem)
  from mlgo.training import pipeline  # pylint: disable=import-outside-toplevel,unused-import
  parse_and_bind_gin(gin_files, a.gin_bindings)
  import gin  # pylint: disable=import-outside-toplevel
  from mlgo import corpus  # pylint: disable=import-outside-toplevel
  from mlgo.problems import get_problem  # pylint: disable=import-outside-toplevel
  from mlgo.training import ppo  # pylint: disable=import-outside-toplevel
  cfg = pipeline.PipelineConfig()
  if a.iterations is not None and a.time_budget is not None:
    raise SystemExit("give --iterations or --time_budget, not both")
  if a.iterations is not None:
    if a.iterations < 1:
      raise SystemExit(f"--iterations={a.iterations}: must be at least 1")
    cfg.ppo_iterations = a.iterations
  if a.time_budget is not None:
    cfg.time_budget = a.time_budget
    cfg.ppo_iterations = 0
  out = user_path(a.output or f"mlgo_{a.problem}")
  out.mkdir(parents=True, exist_ok=True)
  corpus_dir = corpus.corpus_arg(a.corpus, get_problem(a.problem).corpus_opt)
  rep = pipeline.run(a.problem, corpus_dir, out, cfg=cfg, ppo_config=ppo.PPOConfig(),
                     warmstart=user_path(a.warmstart) if a.warmstart else None)
  with open(out / "operative_config.gin", "w") as f:
    f.write(gin.operative_config_str())
  for line in rep.get("guarded", []):  # guarded compiles: reported apart from the policy's
    print(line)
  for line in rep.get("unseen", []):   # packages never trained on, beside the held-out line
    print(line)
  if "eval" in rep:
    print(rep["eval"]["line"])
  return 0


if __name__ == "__main__":
  sys.exit(train_main())
