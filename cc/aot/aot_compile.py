"""Bazel genrule tool: XLA AOT compile of a SavedModel (see rules/aot.bzl)."""
import argparse
import pathlib
import sys

from mlgo.export import aot


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__)
  ap.add_argument("--saved_model_files", required=True,
                  help="space-separated files of the SavedModel (one is saved_model.pb)")
  ap.add_argument("--out_dir", required=True)
  ap.add_argument("--cpp_class", default="mlgo::Policy")
  ap.add_argument("--problem", default="")
  args = ap.parse_args(argv)
  pbs = [f for f in args.saved_model_files.split() if f.endswith("saved_model.pb")]
  if len(pbs) != 1:
    sys.exit(f"aot_compile: expected exactly one saved_model.pb among the inputs, got {pbs}")
  try:
    aot.aot_compile(pathlib.Path(pbs[0]).parent, args.out_dir, cpp_class=args.cpp_class,
                    problem=args.problem)
  except aot.ExportError as e:
    sys.exit(f"aot_compile: {e}")


if __name__ == "__main__":
  main()
