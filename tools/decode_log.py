"""Prints a training-log stream (LLVM TrainingLogger / interactive channel) as JSON
lines, one per observation. Usage: bazel run //tools:decode_log -- FILE"""

import argparse
import os
import sys

from mlgo.log import LogFormatError
from mlgo.log.decode import decode
from mlgo.util.cli import user_path


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__)
  ap.add_argument("file", help="recorded stream (e.g. from compile_one --record)")
  args = ap.parse_args(argv)
  path = user_path(args.file)
  try:
    fd = os.open(path, os.O_RDONLY)
  except OSError as e:
    print(f"decode_log: {path}: cannot open: {e.strerror}", file=sys.stderr)
    return 1
  try:
    decode(fd, sys.stdout)
  except LogFormatError as e:
    sys.stdout.flush()
    print(f"decode_log: {path}: {e}", file=sys.stderr)
    return 1
  except BrokenPipeError:  # e.g. piped into head
    return 0
  finally:
    os.close(fd)
  return 0


if __name__ == "__main__":
  sys.exit(main())
