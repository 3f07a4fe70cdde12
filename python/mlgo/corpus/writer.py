"""Writing a corpus in the mlgo-utils layout with our metadata (the layout is described
in mlgo.corpus.format, which reads it)."""
from __future__ import annotations

import json
import os
import pathlib
import shutil
from typing import Iterable, Sequence

from mlgo.corpus.format import (DESCRIPTION, FORMAT_VERSION, HELDOUT_FRACTION, MODULES_FILE,
                                CorpusError, CorpusModule, kind_of, split_for)

class CorpusWriter:
  """Writes a corpus incrementally: `add` each module, then `finish`.

  Bitcode is copied (or moved) into place; the description and module metadata are
  written by `finish`, so a directory without corpus_description.json is incomplete.
  """

  def __init__(self, path: str | os.PathLike, *, llvm_version: int, opt_level: str,
               clang_version: str | None = None,
               heldout_fraction: float = HELDOUT_FRACTION, extra_meta: dict | None = None):
    self.path = pathlib.Path(path)
    self.path.mkdir(parents=True, exist_ok=True)
    self.llvm_version = int(llvm_version)
    self.opt_level = opt_level.lstrip("-")
    self.clang_version = clang_version
    self.heldout_fraction = heldout_fraction
    self.extra_meta = dict(extra_meta or {})
    self._modules: dict[str, dict] = {}

  def add(self, name: str, bc: str | os.PathLike | bytes, cc1_flags: Sequence[str], *,
          package: str, language: str, split: str | None = None,
          source: str | None = None, move: bool = False, kind: str | None = None) -> str:
    if name in self._modules:
      raise CorpusError(f"{self.path}: duplicate module name {name!r}")
    if language not in ("c", "c++"):
      raise ValueError(f"language must be 'c' or 'c++', not {language!r}")
    for f in cc1_flags:
      if "\0" in f:
        raise ValueError(f"module {name}: flag contains NUL: {f!r}")
    dest = self.path / (name + ".bc")
    dest.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(bc, bytes):
      dest.write_bytes(bc)
    elif os.path.abspath(bc) != os.path.abspath(dest):
      if move:
        shutil.move(os.fspath(bc), dest)
      else:
        shutil.copyfile(bc, dest)
    (self.path / (name + ".cmd")).write_bytes("\0".join(cc1_flags).encode("utf-8"))
    entry = {"package": package, "language": language,
             "split": split or split_for(name, self.heldout_fraction),
             "kind": kind or kind_of(name)}
    if source:
      entry["source"] = source
    self._modules[name] = entry
    return str(dest)

  def __len__(self):
    return len(self._modules)

  def finish(self) -> pathlib.Path:
    names = sorted(self._modules)
    meta = {"format": FORMAT_VERSION, "llvm_version": self.llvm_version,
            "clang_version": self.clang_version, "opt_level": self.opt_level,
            "heldout_fraction": self.heldout_fraction}
    meta.update(self.extra_meta)
    _write_json(self.path / MODULES_FILE,
                {"modules": {n: self._modules[n] for n in names}})
    _write_json(self.path / DESCRIPTION,
                {"has_thinlto": False, "modules": names, "mlgo": meta})
    return self.path


def _write_json(path: pathlib.Path, data):
  tmp = path.with_name(path.name + ".tmp")
  tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
  os.replace(tmp, path)


def write_corpus(path: str | os.PathLike, modules: Iterable[CorpusModule], *,
                 llvm_version: int, opt_level: str, clang_version: str | None = None,
                 heldout_fraction: float = HELDOUT_FRACTION) -> pathlib.Path:
  """Writes `modules` (e.g. a loaded corpus' subset) as a new corpus at `path`."""
  w = CorpusWriter(path, llvm_version=llvm_version, opt_level=opt_level,
                   clang_version=clang_version, heldout_fraction=heldout_fraction)
  for m in modules:
    w.add(m.name, m.bc_path, m.cc1_flags, package=m.package, language=m.language,
          split=m.split, source=m.source, kind=m.kind)
  return w.finish()
