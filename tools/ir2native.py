"""IR2Native: a native-size model of functions for per-call-site inlining credit.

  bazel run //tools:ir2native -- collect --corpus=@default --output=DIR \
      [--passes=default,flip0.1] [--final_ir=0.25] [--limit=N] [--workers=ray ...]
  bazel run //tools:ir2native -- train --data=DIR[,DIR] --output=MODEL_DIR [--epochs=60]
  bazel run //tools:ir2native -- report --model=MODEL_DIR --train=DIR \
      --suite=heldout=DIR:heldout --suite=@extra=DIR2 [--output=REPORT_DIR]

collect compiles every module with stock clang-22 (interactive inliner channel with the
instruction-mix embeddings, inline remarks, the object's symbol sizes) and writes one row
per function: its end-of-inlining state and its native size (resumable: run it again
after an interruption). train fits the model on the training split's rows. report
compares it with the IR instruction count and TargetTransformInfo code-size cost on the
same functions of each suite (report.md, report.json, report.png). Use the model in
training with `PPOConfig.credit = "ir2native"` and `PPOConfig.credit_model = MODEL_DIR`
(configs/inlining_ir2native.gin).
"""
import argparse
import sys

from mlgo import workers
from mlgo.util.cli import user_path


def _collect(a):
  from mlgo import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
  from mlgo.ir2native import dataset  # pylint: disable=import-outside-toplevel
  c = corpus_lib.load_corpus(corpus_lib.corpus_arg(a.corpus))
  modules = c.modules[:a.limit] if a.limit else c.modules
  stats = dataset.collect(modules, user_path(a.output), passes=a.passes.split(","),
                          final_ir=a.final_ir, jobs=a.jobs, timeout=a.timeout)
  print(f"ir2native collect: {stats['compiles']} compiles ({stats['skipped_done']} from an "
        f"earlier run), {stats['failed']} failed, {stats['rows']} new function rows -> "
        f"{user_path(a.output)}")
  return 0 if stats["compiles"] else 1


def _train(a):
  from mlgo.ir2native import dataset, model, states  # pylint: disable=import-outside-toplevel
  from mlgo.problems import ir2vec  # pylint: disable=import-outside-toplevel
  d = dataset.load([str(user_path(x)) for x in a.data.split(",")], splits=("train",))
  n = len(d["native_size"])
  if not n:
    print(f"ir2native train: no training-split rows in {a.data}", file=sys.stderr)
    return 1
  fields = list(states.SCALARS) + list(ir2vec.DIMENSIONS)
  if d["state"].shape[1] != len(fields):
    print(f"ir2native train: rows have {d['state'].shape[1]} state fields, expected "
          f"{len(fields)}", file=sys.stderr)
    return 1
  m = model.fit(d["state"], d["native_size"], fields, epochs=a.epochs, seed=a.seed,
                stream=sys.stderr)
  m.meta["data"] = a.data
  m.save(user_path(a.output))
  print(f"ir2native train: {n} rows -> {user_path(a.output)}")
  return 0


def _report(a):
  from mlgo.ir2native import model, report  # pylint: disable=import-outside-toplevel
  suites = {}
  for s in a.suite:
    name, _, spec = s.partition("=")
    path, _, split = spec.partition(":")
    suites[name] = ([str(user_path(p)) for p in path.split(",")],
                    (split,) if split else None)
  m = model.SizeModel.load(user_path(a.model))
  rep = report.run(m, [str(user_path(p)) for p in a.train.split(",")], suites,
                   user_path(a.output))
  print(report.markdown(rep))
  print(f"wrote {user_path(a.output) / 'report.md'} (and .json, .png)")
  return 0 if rep["suites"] else 1


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  sub = ap.add_subparsers(dest="cmd", required=True)
  c = sub.add_parser("collect")
  c.add_argument("--corpus", default=None, help="corpus dir or @SET (default: @default)")
  c.add_argument("--output", required=True)
  c.add_argument("--passes", default="default,flip0.1")
  c.add_argument("--final_ir", type=float, default=0.25,
                 help="fraction of training modules whose final IR is also costed for the "
                      "baselines (held-out modules always; 0: none)")
  c.add_argument("--limit", type=int, default=0)
  c.add_argument("--jobs", type=int, default=2)
  c.add_argument("--timeout", type=float, default=300.0)
  workers.add_flags(c)
  t = sub.add_parser("train")
  t.add_argument("--data", required=True)
  t.add_argument("--output", required=True)
  t.add_argument("--epochs", type=int, default=60)
  t.add_argument("--seed", type=int, default=0)
  r = sub.add_parser("report")
  r.add_argument("--model", required=True)
  r.add_argument("--train", required=True)
  r.add_argument("--suite", action="append", required=True,
                 help="NAME=DIR[,DIR][:SPLIT], e.g. heldout=data:heldout")
  r.add_argument("--output", default="ir2native_report")
  a = ap.parse_args(argv)
  if a.cmd == "collect":
    workers.apply_flags(a)
    return _collect(a)
  return _train(a) if a.cmd == "train" else _report(a)


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()
  sys.exit(main())
