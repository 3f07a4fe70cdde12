"""Bazel genrule tool: writes a small random-weight policy dir (mlgo.export.tiny)."""
import argparse
import json
import pathlib
import shutil
import tempfile

from mlgo.export import tiny
from mlgo.util import files


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__)
  ap.add_argument("--problem", required=True)
  ap.add_argument("--out_dir", required=True)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--drop_feature", default="",
                  help="leave this feature out (builds a deliberately mismatching policy)")
  args = ap.parse_args(argv)
  # A Bazel build action shares the machine's /tmp (only tests get a private one):
  # TensorFlow's autograph files and their __pycache__ go to a dir removed at exit.
  files.private_tempdir(root=tempfile.gettempdir(), prefix="mlgo-build-")
  feats = [f for f in tiny.problem_features(args.problem) if f["name"] != args.drop_feature]
  out = pathlib.Path(args.out_dir)
  tmp = out.with_name(out.name + ".build")
  shutil.rmtree(tmp, ignore_errors=True)
  tiny.make_tiny_policy(args.problem, tmp, seed=args.seed, features=feats)
  # Bazel declared the outputs inside out_dir; move the files there.
  for f in tmp.rglob("*"):
    if f.is_file():
      dst = out / f.relative_to(tmp)
      dst.parent.mkdir(parents=True, exist_ok=True)
      shutil.move(str(f), dst)
  shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
  main()
