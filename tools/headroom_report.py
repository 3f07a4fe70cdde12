"""What inlining decisions of the simplest kinds could win on a corpus: per module the
smallest of the default, the default with its threshold moved, and (with --policy) that
policy with its inline logit moved, and with --search=N a greedy search over single
decisions (N compiles a module). An oracle, to size expectations before training and
to read a trained policy's figure against (mlgo/evaluation/headroom.py).

  bazel run //tools:headroom_report -- [--corpus=DIR|@SET] [--split=heldout|all] \
      [--policy=models/inlining_oz_ir2vec] [--thresholds=-40,-20,-10,10,20,40] \
      [--shifts=-4,-3,-2,-1,-0.5,0,0.5,1,2,3,4] [--search=N] [--output=DIR] \
      [--workers=ray ...]

Writes headroom.csv, summary.json, headroom.png (and failed.csv) under --output.
"""
import argparse
import sys

from mlgo import workers
from mlgo.util.cli import policy_path, user_path


def _numbers(text, kind):
  try:
    return [kind(x) for x in text.split(",") if x.strip()]
  except ValueError:
    raise SystemExit(f"headroom_report: not a list of numbers: {text!r}") from None


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--problem", default="inlining")
  ap.add_argument("--corpus", default=None,
                  help="corpus dir or @SET (default: the default -Oz corpus)")
  ap.add_argument("--split", default=None,
                  help="heldout, train or all (default: heldout for the default corpus, "
                       "all for any other)")
  ap.add_argument("--policy", default=None, help="a policy dir: adds its logit shifts")
  ap.add_argument("--thresholds", default="-40,-20,-10,10,20,40",
                  help="threshold moves of the default (empty: none)")
  ap.add_argument("--shifts", default="-4,-3,-2,-1,-0.5,0,0.5,1,2,3,4",
                  help="inline-logit moves of --policy (0 is the policy itself)")
  ap.add_argument("--search", type=int, default=0,
                  help="also a greedy search over single decisions, at most this many "
                       "compiles a module, from --policy's compile (or the default's)")
  ap.add_argument("--search_seconds", type=float, default=None,
                  help="with --search: a module's search stops after this much wall time")
  ap.add_argument("--search_bytes", type=float, default=None,
                  help="with --search: a module's search compiles at most this many bytes "
                       "of bitcode in all (module size x compiles; deterministic, unlike "
                       "--search_seconds)")
  ap.add_argument("--output", default="headroom")
  ap.add_argument("--jobs", type=int, default=2)
  ap.add_argument("--timeout", type=float, default=300.0)
  workers.add_flags(ap)
  a = ap.parse_args(argv)
  workers.apply_flags(a)
  from mlgo import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
  from mlgo.evaluation import headroom  # pylint: disable=import-outside-toplevel
  split = a.split or ("heldout" if a.corpus is None else "all")
  try:
    s = headroom.run(a.problem, corpus_lib.corpus_arg(a.corpus), user_path(a.output),
                     policy=policy_path(a.policy) if a.policy else None, split=split,
                     thresholds=_numbers(a.thresholds, int),
                     shifts=_numbers(a.shifts, float), search=a.search,
                     search_seconds=a.search_seconds, search_bytes=a.search_bytes,
                     jobs=a.jobs, timeout=a.timeout)
  except ValueError as e:
    print(f"headroom_report: {e}", file=sys.stderr)
    return 2
  print(f"wrote {user_path(a.output) / 'headroom.csv'}")
  return 0 if s["modules"] else 1


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()
  sys.exit(main())
