"""Command lines of the regalloc tools (tools/train_regalloc.py, evaluate for regalloc)."""
import argparse
import json
import sys

from mlgo.util.cli import repo_root, user_path

TRAIN_USAGE = """Train a register-allocation policy (eviction or priority) for stock llc-22.

  bazel run //tools:train_regalloc -- [--problem=regalloc_eviction|regalloc_priority]
      [--corpus=DIR] [--output=DIR] [--warmstart=POLICY_DIR] [--time_budget=SECONDS]
      [--gin_files=configs/X.gin] [--gin_bindings=RegallocPPOConfig.jobs=2]
Without --corpus the default corpus at -O2 is built once (or reused). Steps: prepare
(optimize once, cache), default trace (tracer plugin), behavioral cloning, PPO for the
time budget, held-out evaluation. Running the same command again reuses finished steps
and resumes PPO. The last line is the held-out summary:
  modules=N functions=F default_cost=C policy_cost=C change=+-X.XX% regressions=K
"""


def _gin(problem, gin_files, gin_bindings):
  import gin  # pylint: disable=import-outside-toplevel
  from mlgo.regalloc import pipeline, ppo  # pylint: disable=import-outside-toplevel,unused-import
  root = repo_root()
  files = []
  if gin_files is None:
    gin_files = [f"configs/{problem}.gin"]
  for g in gin_files:
    p = user_path(g)
    if not p.exists() and root is not None and (root / g).exists():
      p = root / g
    if not p.exists():
      here = __import__("pathlib").Path(__file__).resolve()
      for parent in here.parents:
        if (parent / g).exists():
          p = parent / g
          break
    if not p.exists():
      raise SystemExit(f"gin file {g} not found (looked in the working dir and the repo)")
    gin.add_config_file_search_path(str(p.parent))
    files.append(str(p))
  gin.parse_config_files_and_bindings(files, gin_bindings)


def default_corpus_o2(stream=sys.stderr):
  from mlgo import corpus  # pylint: disable=import-outside-toplevel
  return corpus.default_corpus(22, opt="O2")


def train_main(argv=None):
  ap = argparse.ArgumentParser(description=TRAIN_USAGE,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--problem", default="regalloc_eviction",
                  choices=["regalloc_eviction", "regalloc_priority"])
  ap.add_argument("--corpus", help="corpus dir in the mlgo-utils format (default: the "
                  "default corpus at -O2, built once)")
  ap.add_argument("--output", help="output dir (default: ./mlgo_<problem>)")
  ap.add_argument("--warmstart", help="policy dir to start PPO from instead of BC")
  ap.add_argument("--time_budget", type=float, help="total seconds for the run "
                  "(default from the gin config: about 15 minutes)")
  ap.add_argument("--gin_files", action="append", default=None)
  ap.add_argument("--gin_bindings", action="append", default=[])
  a = ap.parse_args(argv)
  _gin(a.problem, a.gin_files, a.gin_bindings)
  import gin  # pylint: disable=import-outside-toplevel
  from mlgo.regalloc import eval_report, pipeline  # pylint: disable=import-outside-toplevel
  cfg = pipeline.PipelineConfig()
  if a.time_budget is not None:
    cfg.time_budget = a.time_budget
  corpus_dir = user_path(a.corpus) if a.corpus else default_corpus_o2()
  out = user_path(a.output or f"mlgo_{a.problem}")
  out.mkdir(parents=True, exist_ok=True)
  with open(out / "operative_config.gin", "w") as f:
    f.write(gin.config_str())
  rep = pipeline.run(a.problem, corpus_dir, out,
                     warmstart=user_path(a.warmstart) if a.warmstart else None, cfg=cfg)
  if "eval" in rep:
    print(eval_report.format_report(rep["eval"]))
  return 0


def evaluate_main(argv=None):
  ap = argparse.ArgumentParser(description="Held-out evaluation of a regalloc policy.")
  ap.add_argument("--problem", default="regalloc_eviction",
                  choices=["regalloc_eviction", "regalloc_priority"])
  ap.add_argument("--corpus", help="corpus dir (default: the default corpus at -O2)")
  ap.add_argument("--policy", required=True, help="policy dir, or 'default'")
  ap.add_argument("--split", default="heldout", choices=["heldout", "train", "all"])
  ap.add_argument("--output", default="evaluation")
  ap.add_argument("--jobs", type=int, default=2)
  ap.add_argument("--timeout", type=float, default=300.0)
  a = ap.parse_args(argv)
  from mlgo.regalloc import eval_report, evaluate, prepare  # pylint: disable=import-outside-toplevel
  corpus_dir = user_path(a.corpus) if a.corpus else default_corpus_o2()
  policy = a.policy
  if policy != "default":
    p = user_path(policy)
    if not p.exists() and repo_root() is not None and (repo_root() / policy).exists():
      p = repo_root() / policy
    policy = p
  prep = prepare.prepare(corpus_dir, jobs=a.jobs)
  out = user_path(a.output)
  s = evaluate.evaluate(prep, a.problem, policy, out, split=a.split, jobs=a.jobs,
                        timeout=a.timeout)
  (out / "summary.json").write_text(json.dumps(s, indent=1) + "\n")
  print(eval_report.format_report(s))
  return 0
