"""A policy on code it was not trained on: held-out split, @extra and @unseen packages.

  bazel run //tools:generalization_report -- --problem=inlining --policy=models/inlining_oz \
      [--suites=heldout,@extra,@unseen] [--output=DIR] [--workers=ray ...]

A suite is `heldout` (the default corpus' held-out split), `@SET` (a package set's
corpus, built once and cached: @extra, @unseen) or a corpus directory (e.g. one written
by mlgo-utils' make_corpus). Prints one line per suite (total change, median module,
modules more than 1% worse, packages worse than +0.5%); writes per-suite evaluations,
generalization.md, generalization.json and generalization.png under --output. With
--guarded the suites are compiled guarded, and the same compiles give the policy's own
report too (OUTPUT/plain, its lines prefixed "plain").
"""
import argparse
import sys

from mlgo import workers
from mlgo.util.cli import add_candidate_flags, candidate_dirs, policy_path, user_path


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--problem", default="inlining")
  ap.add_argument("--policy", required=True, help="policy dir, or 'default'")
  ap.add_argument("--suites", default="heldout,@extra,@unseen")
  ap.add_argument("--output", default="generalization")
  ap.add_argument("--jobs", type=int, default=2)
  ap.add_argument("--timeout", type=float, default=300.0)
  ap.add_argument("--guarded", action="store_true",
                  help="score guarded compiles (regalloc: per function the better of the "
                       "default and the policy; inlining: per module), mlgo/env/guarded.py. "
                       "The policy's own figures come from the same compiles, in "
                       "OUTPUT/plain (lines starting with 'plain')")
  add_candidate_flags(ap)
  workers.add_flags(ap)
  a = ap.parse_args(argv)
  candidates = candidate_dirs(ap, a, a.guarded)
  workers.apply_flags(a)
  from mlgo.evaluation import generalization  # pylint: disable=import-outside-toplevel
  policy = a.policy
  if policy != "default":
    policy = policy_path(policy)
  suites = [s if s == "heldout" or s.startswith("@") else str(user_path(s))
            for s in a.suites.split(",") if s]
  out = user_path(a.output)
  plain_out = out / "plain" if a.guarded else None
  rep = generalization.run(a.problem, policy, out, suites, jobs=a.jobs, timeout=a.timeout,
                           guarded=a.guarded, plain_output=plain_out,
                           plain_stream=_Prefixed(sys.stdout, "plain ") if a.guarded else None,
                           candidates=candidates, samples=a.samples,
                           no_more_spill_code=a.no_more_spill_code)
  print(f"wrote {out / 'generalization.md'}"
        + (f" and {plain_out / 'generalization.md'}" if plain_out else ""))
  return 0 if rep["suites"] else 1


class _Prefixed:
  """A text stream that starts every line with `prefix` (the plain lines of --guarded)."""

  def __init__(self, stream, prefix):
    self.stream, self.prefix = stream, prefix

  def write(self, text):
    self.stream.write("".join(self.prefix + line if line.strip() else line
                              for line in text.splitlines(keepends=True)))

  def flush(self):
    self.stream.flush()


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()
  sys.exit(main())
