"""Finding a C++ compiler and this repository's C++ sources, for the parts of mlgo that
compile native code outside Bazel (the exported plugin and server, the log reader when a
tool runs straight from a checkout)."""
import os
import pathlib
import shutil

from mlgo.util import cli


def compiler() -> str | None:
  """$CXX, else g++, else clang++-22, else clang++; None when there is none."""
  for c in (os.environ.get("CXX"), "g++", "clang++-22", "clang++"):
    if c and shutil.which(c):
      return shutil.which(c)
  return None


def source_root(*rels: str) -> pathlib.Path | None:
  """The directory holding all of this repository's files `rels` (so one -I at it resolves
  their "cc/..." includes): the checkout, or the runfiles tree under Bazel; else None."""
  here = pathlib.Path(__file__)
  roots = []
  if os.environ.get("BUILD_WORKSPACE_DIRECTORY"):
    roots.append(pathlib.Path(os.environ["BUILD_WORKSPACE_DIRECTORY"]))
  roots += list(here.absolute().parents) + list(here.resolve().parents)
  roots += cli.runfile_candidates("")
  for r in roots:
    for cand in (r, r / "mlgo"):
      if all((cand / rel).exists() for rel in rels):
        return cand
  return None
