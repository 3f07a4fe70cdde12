"""Bazel genrule tool: XLA AOT compile of a SavedModel (see rules/aot.bzl)."""
import argparse
import pathlib
import sys
import tempfile

from mlgo.export import aot
from mlgo.util import files


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__)
  ap.add_argument("--saved_model_files", required=True,
                  help="space-separated files of the SavedModel (one is saved_model.pb)")
  ap.add_argument("--out_dir", required=True)
  ap.add_argument("--cpp_class", default="mlgo::Policy")
  ap.add_argument("--problem", default="")
  args = ap.parse_args(argv)
  # A Bazel build action shares the machine's /tmp (only tests get a private one):
  # TensorFlow's autograph files and their __pycache__ go to a dir removed at exit.
  files.private_tempdir(root=tempfile.gettempdir(), prefix="mlgo-build-")
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
