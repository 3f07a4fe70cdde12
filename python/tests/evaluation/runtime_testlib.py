"""Shared by the runtime_check tests: a runtime program with its Debian source at hand."""
import os
import pathlib
import pwd

import pytest

from mlgo.corpus import sources
from mlgo.evaluation import runtime_programs as rp
from mlgo.util import cli


def source_home(package):
  """An MLGO_HOME whose source cache has `package` unpacked (the user's, also from inside
  Bazel's sandbox), else None."""
  homes = [cli.mlgo_home(), pathlib.Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "mlgo"]
  for h in homes:
    if (h / "sources" / package / ".unpacked").exists():
      return h
  return None


def program_with_source(name, tmp_path, monkeypatch):
  """The program `name`, MLGO_HOME set to a home whose source cache holds its package
  (fetched into a private home if no cache has it: needs apt's deb-src)."""
  prog = next(p for p in rp.PROGRAMS if p.name == name)
  home = source_home(prog.package)
  if home is None:
    home = tmp_path / "home"
    try:
      sources.fetch_source(prog.package, home / "sources")
    except (sources.BuildError, OSError) as e:
      pytest.skip(f"Debian source of {prog.package} unavailable: {e}")
  monkeypatch.setenv("MLGO_HOME", str(home))
  return prog
