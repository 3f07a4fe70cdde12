"""Rollout probes of a trained policy: per-decision credit, measured (inlining, eviction).

  bazel run //tools:probe_decisions -- --policy=DIR --output=DIR [--corpus=DIR]
      [--split=train] [--max_probes=16] [--max_modules=N] [--jobs=N]
For each module: one greedy compile, then one compile per probed decision with that
decision answered otherwise (inlining: the other answer; eviction: the default-equivalent
column where the policy chose another) and the policy deciding the rest; stores each
probe's change of the module's score (.text bytes; weighted spill cost) and a sample of
the policy's own decisions (mlgo.training.rollouts). Inlining with
--credit=function_size --flips_per_compile=K: up to K flips in different functions share
a compile, each credited with its own caller's and callee's measured size change
(mlgo.training.multi_flip; about a third less time a round for 1.8x the probes at
K=4, --max_probes=16; docs/ir2native.md). --callee_groups=G adds up to G compiles a
module, each answering every call to one callee the other way at once (LLVM's
-force-attribute), its measured change shared by those calls (mlgo.training.
callee_groups): what keeping all calls to a small many-caller callee saves, which no
single flip shows. Rerunning the same
command continues where it stopped. Train on the result with //tools:train_on_probes.
"""
import argparse
import sys

from mlgo.util.cli import user_path
from mlgo import workers


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--policy", required=True, help="policy dir to probe")
  ap.add_argument("--output", required=True, help="probe dir to write (resumable)")
  ap.add_argument("--corpus", help="corpus dir (default: the default corpus)")
  ap.add_argument("--split", default="train", choices=["train", "heldout", "all"])
  ap.add_argument("--max_probes", type=int, default=16, help="probes per module, at most")
  ap.add_argument("--random_fraction", type=float, default=0.25,
                  help="share of probes at random decisions (the rest: least confident)")
  ap.add_argument("--anchors", type=int, default=200,
                  help="the policy's own decisions kept per module")
  ap.add_argument("--max_modules", type=int, help="probe a seeded sample of this many")
  ap.add_argument("--jobs", type=int, help="parallel compiles (default: cores)")
  ap.add_argument("--timeout", type=float, default=300.0, help="seconds per compile")
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--credit_model", help="an IR2Native model dir (inlining_ir2vec "
                  "policies): also measure how well its per-decision credit predicts "
                  "each flip (credit_spearman, credit_sign in the last line)")
  ap.add_argument("--credit", choices=["ir2native", "function_size"], default="ir2native",
                  help="which credit to measure: ir2native (needs --credit_model) or "
                  "function_size (measured per-function sizes, no model; every flip is "
                  "compiled with remarks)")
  ap.add_argument("--flips_per_compile", type=int, default=1,
                  help="with --credit=function_size: up to this many flips (in different "
                  "functions) share one compile, each credited by its own caller's and "
                  "callee's measured size (mlgo.training.multi_flip); K times fewer "
                  "compiles, at the credit's error")
  ap.add_argument("--flip_compiles", type=int, default=0,
                  help="with --flips_per_compile > 1: spend this many flip compiles on a "
                  "large module (fewer on a small one, ~sqrt(decisions)/2) and pack each "
                  "with as many flips as its functions allow, instead of --max_probes "
                  "(0: off)")
  ap.add_argument("--callee_groups", type=int, default=0,
                  help="with --credit=function_size: up to this many more compiles a "
                  "module, each flipping every call to one callee (0: off)")
  workers.add_flags(ap)
  a = ap.parse_args(argv)
  workers.apply_flags(a)
  from mlgo import corpus  # pylint: disable=import-outside-toplevel
  from mlgo.policy import policy_io  # pylint: disable=import-outside-toplevel
  from mlgo.problems import get_problem  # pylint: disable=import-outside-toplevel
  from mlgo.training import rollouts  # pylint: disable=import-outside-toplevel
  problem = get_problem(policy_io.load_policy(user_path(a.policy)).problem)
  s = rollouts.probe_corpus(corpus.corpus_arg(a.corpus, problem.corpus_opt), user_path(a.policy),
                            user_path(a.output), split=a.split, max_probes=a.max_probes,
                            random_fraction=a.random_fraction, anchors=a.anchors,
                            max_modules=a.max_modules, jobs=a.jobs, timeout=a.timeout,
                            seed=a.seed,
                            credit_model=str(user_path(a.credit_model)) if a.credit_model
                            else None, credit_kind=a.credit,
                            flips_per_compile=a.flips_per_compile,
                            flip_compiles=a.flip_compiles, callee_groups=a.callee_groups)
  return 0 if s["modules"] or not s["failed"] else 1


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()  # nothing the tool or TensorFlow writes is left in /tmp
  sys.exit(main())
