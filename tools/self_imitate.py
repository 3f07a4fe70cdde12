"""Self-imitation: fine-tune a policy on the best compiles found around it.

Per function (regalloc): the cheapest of the default's, the policy's greedy and N sampled
allocations.
  bazel run //tools:self_imitate -- --policy=models/regalloc_eviction --output=DIR \
      [--samples=3] [--temperature=1] [--no_default_candidate] [--rounds=1] [--margin=0]
      [--corpus=DIR|@default] [--jobs=2]
Per module (the size inliner): a greedy search over single decisions from the policy's
compile (--search=N compiles a module; mlgo.evaluation.headroom), its decisions imitated.
  bazel run //tools:self_imitate -- --problem=inlining --policy=models/inlining_oz_ctx \
      --output=DIR --search=64 [--search_bytes=1e7 | --search_seconds=30] [--sampling_rate=0.25]
      [--no_anchors]
      [--imitate_deferred] [--floor_default[=G]] [--corpus=DIR]
  A policy that defers to clang (models/inlining_oz_ctx) is fine-tuned on the decisions
  its network made and the ones the search flipped, not on clang's answers it passed on.
  --floor_default[=G]: a module's search starts from clang's compile where the policy's
  is more than the fraction G bigger (default 0: any growth; 0.01: more than 1%), and
  every such module of the split is searched besides the sample (what a clone imitates
  never grows past clang's answer by more than G).

Round r writes DIR/round<r>/data (the per-function winners' decisions, a trajectory
dataset) and DIR/round<r>/policy (the fine-tuned policy); round r+1 starts from it.
Everything resumes: a finished round is kept, a half-collected one goes on where it
stopped. Then judge the last policy as any other:
  bazel run //tools:evaluate -- --problem=regalloc_eviction --policy=DIR/round1/policy
(python/mlgo/training/self_imitation.py says why whole-function choices.)
"""
import argparse
import pathlib
import sys

from mlgo.util.cli import user_path
from mlgo import workers


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--policy", required=True, help="policy dir to start from")
  ap.add_argument("--output", required=True, help="run dir (created or resumed)")
  ap.add_argument("--problem", default="regalloc_eviction")
  ap.add_argument("--corpus", default=None,
                  help="corpus dir or @SET (default: the default corpus at the problem's level)")
  ap.add_argument("--split", default="train", choices=["train", "all"])
  ap.add_argument("--samples", type=int, default=3, help="sampled compiles per module")
  ap.add_argument("--rounds", type=int, default=1)
  ap.add_argument("--margin", type=float, default=0.0,
                  help="a candidate replaces the default's allocation of a function only "
                       "if it is cheaper by more than this fraction")
  ap.add_argument("--temperature", type=float, default=1.0,
                  help="the samples' temperature (below 1: nearer the greedy choice)")
  ap.add_argument("--no_default_candidate", action="store_true",
                  help="the default's allocation is compiled for the report only: each "
                       "function's winner is the greedy compile or a sample")
  ap.add_argument("--search", type=int, default=0,
                  help="per-module problems: a greedy search of at most N compiles a module "
                       "instead of per-function candidates")
  ap.add_argument("--search_seconds", type=float, default=None,
                  help="with --search: a module's search stops after this much wall time "
                       "(the best compile so far is kept)")
  ap.add_argument("--search_bytes", type=float, default=None,
                  help="with --search: a module's search compiles at most this many bytes of "
                       "bitcode in all (module .bc size x compiles, so a big module gets "
                       "fewer tries); deterministic, the same collection on any machine")
  ap.add_argument("--sampling_rate", type=float, default=1.0,
                  help="with --search: a seeded share of the split's modules")
  ap.add_argument("--no_anchors", action="store_true",
                  help="with --search: store only the modules the search made smaller")
  ap.add_argument("--floor_default", type=float, nargs="?", const=0.0, default=None,
                  metavar="G",
                  help="with --search: start from clang's compile where the policy's is "
                       "more than the fraction G bigger (default 0), and search every such "
                       "module besides the sample")
  ap.add_argument("--imitate_deferred", action="store_true",
                  help="also clone the decisions a deferring policy handed to the compiler "
                       "(default: left out unless the search flipped them; bc.train_bc "
                       "skip_deferred)")
  ap.add_argument("--max_decisions_per_module", type=int, default=400,
                  help="seeded sample of each module's kept decisions (0: all)")
  ap.add_argument("--bc_epochs", type=int, default=10)
  ap.add_argument("--bc_learning_rate", type=float, default=3e-4)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--jobs", type=int, default=2)
  ap.add_argument("--timeout", type=float, default=300.0, help="per-compile timeout (s)")
  workers.add_flags(ap)
  a = ap.parse_args(argv)
  workers.apply_flags(a)
  if a.samples < 0 or a.rounds < 1 or a.temperature <= 0:
    ap.error("--samples must be >= 0, --rounds >= 1 and --temperature > 0")
  if a.search and (a.search < 2 or not 0 < a.sampling_rate <= 1):
    ap.error("--search needs at least 2 compiles a module and 0 < --sampling_rate <= 1")
  if a.search_seconds is not None and (not a.search or a.search_seconds <= 0):
    ap.error("--search_seconds needs --search and a positive number of seconds")
  if a.search_bytes is not None and (not a.search or a.search_bytes <= 0):
    ap.error("--search_bytes needs --search and a positive number of bytes")
  if a.floor_default is not None and (not a.search or a.floor_default < 0):
    ap.error("--floor_default needs --search and a growth fraction >= 0")
  if a.no_default_candidate and a.samples == 0:
    ap.error("--no_default_candidate needs --samples >= 1 (else the greedy compile is "
             "the only candidate)")
  from mlgo import corpus  # pylint: disable=import-outside-toplevel
  from mlgo.problems import get_problem  # pylint: disable=import-outside-toplevel
  from mlgo.policy import policy_io  # pylint: disable=import-outside-toplevel
  from mlgo.training import bc, self_imitation  # pylint: disable=import-outside-toplevel
  corpus_dir = corpus.corpus_arg(a.corpus, get_problem(a.problem).corpus_opt)
  out = pathlib.Path(user_path(a.output))
  start = pathlib.Path(user_path(a.policy))
  for r in range(1, a.rounds + 1):
    rdir = out / f"round{r}"
    pol = rdir / "policy"
    if (pol / "policy.json").exists():
      print(f"round {r}: done before ({pol})", file=sys.stderr)
      start = pol
      continue
    print(f"round {r}: candidates from {start}", file=sys.stderr)
    if a.search:
      self_imitation.collect_search(corpus_dir, a.problem, start, rdir / "data",
                                    budget=a.search, jobs=a.jobs, timeout=a.timeout,
                                    seed=a.seed + 1000 * r, split=a.split,
                                    sampling_rate=a.sampling_rate,
                                    anchors=not a.no_anchors,
                                    max_seconds=a.search_seconds,
                                    max_bytes=a.search_bytes,
                                    floor_default=a.floor_default)
    else:
      self_imitation.collect(corpus_dir, a.problem, start, rdir / "data", samples=a.samples,
                             jobs=a.jobs, timeout=a.timeout, seed=a.seed + 1000 * r,
                             split=a.split,
                             max_decisions_per_module=a.max_decisions_per_module,
                             margin=a.margin, temperature=a.temperature,
                             default_candidate=not a.no_default_candidate)
    defers = policy_io.load_policy(start).defers
    bc.train_bc(rdir / "data", rdir / "policy.tmp", epochs=a.bc_epochs,
                learning_rate=a.bc_learning_rate, label_smoothing=0.0, seed=a.seed,
                init_policy=start, skip_deferred=defers and not a.imitate_deferred)
    (rdir / "policy.tmp").rename(pol)   # a round counts as done only when its policy is whole
    start = pol
  print(f"self-imitation: last policy {start}", file=sys.stderr)
  return 0


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()  # nothing the tool or TensorFlow writes is left in /tmp
  sys.exit(main())
