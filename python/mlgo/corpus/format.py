"""The corpus on disk: LLVM mlgo-utils layout plus our own metadata.

Layout (what LLVM's mlgo-utils extract_ir/make_corpus write and ml-compiler-opt reads):

    DIR/corpus_description.json   {"modules": [NAME...], "has_thinlto": bool,
                                   "global_command_override": [flags]?}
    DIR/NAME.bc                   pre-optimization bitcode of one translation unit
    DIR/NAME.cmd                  its cc1 flags separated by NUL ("-cc1", "-triple", ...),
                                  without input and output (absent with an override)

Our metadata rides along where mlgo-utils ignores it (its readers only look at the three
keys above; combine_training_corpus compares whole descriptions, so per-module data is
kept out of the description):
    corpus_description.json["mlgo"]  {"format": 1, "llvm_version", "clang_version",
                                      "opt_level", "heldout_fraction"}
    DIR/mlgo_modules.json            {"modules": {NAME: {"package", "language", "split",
                                      "kind", "source"?}}}
A corpus without them (made by mlgo-utils) is read as it is: see `load_corpus` for how
each missing fact is inferred.
"""
from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import os
import pathlib
import re
from typing import Sequence

from mlgo.corpus import bitcode
from mlgo.util import toolchain as toolchain_lib

DESCRIPTION = "corpus_description.json"
MODULES_FILE = "mlgo_modules.json"
FORMAT_VERSION = 1
HELDOUT_FRACTION = 0.2
_UNSPECIFIED_OVERRIDE = ["<UNSPECIFIED>"]


class CorpusError(ValueError):
  """A corpus that cannot be used. The message is one line naming the file."""


@dataclasses.dataclass(frozen=True)
class CorpusProblem:
  """A module that was listed but cannot be used (missing/corrupt file)."""
  name: str
  path: str
  message: str  # one line, names the file

  def __str__(self):
    return self.message


def split_for(name: str, heldout_fraction: float = HELDOUT_FRACTION) -> str:
  """Deterministic train/heldout assignment from a hash of the module name.

  sha256 (not Python's salted hash()) so every machine and run agrees.
  """
  h = int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "big")
  return "heldout" if h / 2.0**64 < heldout_fraction else "train"


# cc1 flags dropped when recompiling a module from its bitcode: the original action,
# input/output and anything that would stop the optimizer or write side files.
_DROP_WITH_VALUE = {
    "-o", "-x", "-dependency-file", "-MT", "-MQ", "-split-dwarf-file",
    "-split-dwarf-output", "-include-pch", "-diagnostic-log-file",
    "-header-include-file", "-stats-file",
}
_DROP_EXACT = {
    "-emit-obj", "-emit-llvm", "-emit-llvm-bc", "-emit-llvm-uselists", "-S",
    "-emit-assembly", "-emit-llvm-only", "-emit-codegen-only", "-fsyntax-only", "-E",
    "-disable-llvm-passes", "-disable-llvm-optzns", "-sys-header-deps",
    "-module-file-deps", "-flto-unit", "-c",
}
_DROP_PREFIX = ("-fembed-bitcode", "-flto=", "-fthinlto-index=", "-stats-file=")
_SOURCE_EXTS = (".c", ".cc", ".cpp", ".cxx", ".c++", ".C", ".i", ".ii", ".bc", ".ll",
                ".m", ".mm")
# Flags whose separate value may look like a source file name (keep both).
_KEEP_VALUE_OF = {"-main-file-name", "-include", "-imacros", "-fdebug-compilation-dir",
                  "-coverage-notes-file", "-coverage-data-file"}


def clean_cc1_flags(flags: Sequence[str]) -> list[str]:
  """`flags` without action, input, output and optimization-disabling flags."""
  out: list[str] = []
  skip_next = False
  for i, f in enumerate(flags):
    if skip_next:
      skip_next = False
      continue
    if f == "":
      continue
    if f in _DROP_WITH_VALUE:
      skip_next = True
      continue
    if f in _DROP_EXACT or f.startswith(_DROP_PREFIX) or f == "-flto":
      continue
    if (not f.startswith("-") and f.endswith(_SOURCE_EXTS)
        and (i == 0 or flags[i - 1] not in _KEEP_VALUE_OF)):
      continue  # the original input file
    out.append(f)
  # A driver-style command (path of clang first) or a bare flag list: make it cc1.
  if out and out[0] != "-cc1":
    if "-cc1" in out:
      out = out[out.index("-cc1"):]
    else:
      out.insert(0, "-cc1")
  if not out:
    out = ["-cc1"]
  return out


@dataclasses.dataclass
class CorpusModule:
  name: str
  bc_path: str
  cmd_path: str
  cc1_flags: list[str]
  package: str
  language: str  # "c" | "c++"
  split: str  # "train" | "heldout"
  source: str | None = None  # original source path (ours only), for reports
  thinlto_index: str | None = None
  # "test" for test/fuzz/benchmark code (often large gtest-heavy C++ units that dominate
  # compile time and .text), else "library". From metadata or inferred from the name.
  kind: str = "library"

  def compile_argv(self, clang: str, output: str, extra_flags: Sequence[str] = (),
                   action: str = "-emit-obj") -> list[str]:
    """Full `clang -cc1 ... -x ir NAME.bc -o OUTPUT -emit-obj` command line.

    Runs the optimization pipeline and code generation of the corpus' opt level, like
    the original `clang -O<lvl> -c`. `extra_flags` come after the module's own flags
    (e.g. `-mllvm -enable-ml-inliner=release`); `action` may be -S or -emit-llvm-bc.
    """
    argv = [clang] + clean_cc1_flags(self.cc1_flags)
    if self.thinlto_index:
      argv += [f"-fthinlto-index={self.thinlto_index}", "-mllvm", "-thinlto-assume-merged"]
    argv += list(extra_flags)
    argv += ["-x", "ir", self.bc_path, "-o", str(output), action]
    return argv


@dataclasses.dataclass
class Corpus:
  path: pathlib.Path
  modules: list[CorpusModule]
  llvm_version: int
  opt_level: str
  has_thinlto: bool = False
  global_command_override: list[str] | None = None
  clang_version: str | None = None
  problems: list[CorpusProblem] = dataclasses.field(default_factory=list)
  # Where each fact came from: "metadata" (recorded by us) or how it was inferred.
  provenance: dict = dataclasses.field(default_factory=dict)
  heldout_fraction: float = HELDOUT_FRACTION

  def split(self, which: str) -> list[CorpusModule]:
    return [m for m in self.modules if m.split == which]

  @property
  def train(self) -> list[CorpusModule]:
    return self.split("train")

  @property
  def heldout(self) -> list[CorpusModule]:
    return self.split("heldout")

  def by_name(self) -> dict[str, CorpusModule]:
    return {m.name: m for m in self.modules}

  def summary(self) -> str:
    langs = collections.Counter(m.language for m in self.modules)
    pkgs = {m.package for m in self.modules}
    return (f"{len(self.modules)} modules ({langs.get('c', 0)} C, {langs.get('c++', 0)} C++) "
            f"from {len(pkgs)} packages, {len(self.heldout)} held out, LLVM {self.llvm_version}, "
            f"-{self.opt_level}" + (f", {len(self.problems)} unusable" if self.problems else ""))

  def check_llvm_version(self, version: int):
    """CorpusError unless the tools of LLVM `version` can read this corpus' bitcode."""
    if int(version) < self.llvm_version:
      raise CorpusError(
          f"{self.path / DESCRIPTION}: corpus bitcode was written by LLVM {self.llvm_version}, "
          f"which LLVM {version} cannot read; rebuild it with "
          f"`bazel run //tools:make_corpus -- --llvm_version={version}`")


# ---------------------------------------------------------------------------------------
# Reading


def _read_json(path: pathlib.Path, what: str) -> dict:
  try:
    text = path.read_text(encoding="utf-8")
  except FileNotFoundError:
    raise CorpusError(f"{path}: missing {what}") from None
  except OSError as e:
    raise CorpusError(f"{path}: cannot read {what}: {e.strerror}") from None
  try:
    data = json.loads(text)
  except json.JSONDecodeError as e:
    raise CorpusError(f"{path}: malformed JSON at line {e.lineno} column {e.colno}: "
                      f"{e.msg}") from None
  if not isinstance(data, dict):
    raise CorpusError(f"{path}: malformed {what}: expected a JSON object")
  return data


def read_cmd(path: str) -> list[str]:
  with open(path, "rb") as f:
    raw = f.read()
  text = raw.decode("utf-8", "replace")
  # extract_ir's files end without a NUL; some tools add a trailing NUL or newline.
  return [p for p in text.rstrip("\0\n").split("\0") if p != ""]


def _language_of(name: str, flags: Sequence[str]) -> str:
  for i, f in enumerate(flags[:-1]):
    if f == "-x":
      v = flags[i + 1]
      if v.startswith(("c++", "objective-c++")):
        return "c++"
      if v in ("c", "cpp-output", "objective-c"):
        return "c"
  for i, f in enumerate(flags[:-1]):
    if f == "-main-file-name":
      lang = _language_of_filename(flags[i + 1])
      if lang:
        return lang
  for f in flags:
    if f.startswith("-std="):
      return "c++" if "++" in f else "c"
  return _language_of_filename(name) or "c"


def _language_of_filename(name: str) -> str | None:
  # extract_ir names modules after the object: foo.cc.o, foo.cpp.o, foo.o
  base = name[:-2] if name.endswith(".o") else name
  ext = os.path.splitext(base)[1]
  if ext in (".cc", ".cpp", ".cxx", ".c++", ".C", ".ii", ".mm", ".hpp"):
    return "c++"
  if ext in (".c", ".i", ".m"):
    return "c"
  return None


_TEST_RE = re.compile(r"(^|[/_.-])(tests?|testing|unittests?|fuzz|fuzzing|fuzzers?|"
                      r"bench|benchmarks?)([/_.-]|$)")


def kind_of(name: str) -> str:
  """"test" for test/fuzz/benchmark sources (by path), else "library"."""
  return "test" if _TEST_RE.search(name.lower()) else "library"


def _opt_level_of(flags: Sequence[str]) -> str | None:
  level = None
  for f in flags:
    if f.startswith("-O") and len(f) <= 4:
      level = f[1:] or "O2"
  return level


def load_corpus(path: str | os.PathLike, strict: bool = False,
                check_bitcode: bool = True) -> Corpus:
  """Reads a corpus directory (ours or one made by mlgo-utils, as it is).

  Malformed or missing corpus_description.json raises CorpusError. A module whose .bc
  is missing/corrupt/truncated or whose .cmd is missing is left out of `modules` and
  recorded in `problems` (one-line messages naming the file) so reports still cover all
  other modules; with strict=True the first such problem raises CorpusError instead.

  For corpora without our metadata: language from the flags (-x, -main-file-name's
  extension, -std=) or the module name's extension; package from the module name's
  first path component (else the corpus directory's name); split from a hash of the
  name; llvm_version from the first module's bitcode producer string (e.g. LLVM22.1.8),
  else the default LLVM; opt level from the most common -O flag in the .cmd files.
  """
  root = pathlib.Path(path)
  if not root.is_dir():
    raise CorpusError(f"{root}: corpus directory does not exist")
  desc_path = root / DESCRIPTION
  desc = _read_json(desc_path, "corpus description")
  modules_raw = desc.get("modules")
  if not isinstance(modules_raw, list) or not all(isinstance(m, str) for m in modules_raw):
    raise CorpusError(f"{desc_path}: malformed corpus description: \"modules\" must be a "
                      f"list of module names")
  has_thinlto = bool(desc.get("has_thinlto", False))
  override = desc.get("global_command_override")
  if override is not None:
    if not isinstance(override, list) or not all(isinstance(f, str) for f in override):
      raise CorpusError(f"{desc_path}: malformed corpus description: "
                        f"\"global_command_override\" must be a list of flags")
    if override == _UNSPECIFIED_OVERRIDE:
      raise CorpusError(f"{desc_path}: global_command_override is <UNSPECIFIED>; fill in "
                        f"the flags the modules should be compiled with")
  meta = desc.get("mlgo") if isinstance(desc.get("mlgo"), dict) else {}
  per_module: dict = {}
  mod_path = root / MODULES_FILE
  if mod_path.exists():
    per_module = _read_json(mod_path, "module metadata").get("modules") or {}
    if not isinstance(per_module, dict):
      raise CorpusError(f"{mod_path}: malformed module metadata: \"modules\" must be an "
                        f"object")
  heldout_fraction = float(meta.get("heldout_fraction", HELDOUT_FRACTION))

  provenance = {}
  modules: list[CorpusModule] = []
  problems: list[CorpusProblem] = []
  producer_version = None
  seen = set()

  def problem(name, p, msg):
    if strict:
      raise CorpusError(msg)
    problems.append(CorpusProblem(name, str(p), msg))

  for name in modules_raw:
    if name in seen:
      problem(name, desc_path, f"{desc_path}: module {name!r} listed twice")
      continue
    seen.add(name)
    bc = root / (name + ".bc")
    cmd = root / (name + ".cmd")
    if not bc.exists():
      problem(name, bc, f"{bc}: missing bitcode for module {name!r} listed in {DESCRIPTION}")
      continue
    if check_bitcode:
      try:
        producer = bitcode.inspect_bitcode(str(bc))
      except bitcode.BitcodeError as e:
        problem(name, bc, str(e))
        continue
      if producer_version is None:
        producer_version = bitcode.producer_llvm_version(producer)
    if override is not None:
      flags = list(override)
    else:
      if not cmd.exists():
        problem(name, cmd, f"{cmd}: missing command line file for module {name!r}")
        continue
      try:
        flags = read_cmd(str(cmd))
      except OSError as e:
        problem(name, cmd, f"{cmd}: cannot read command line: {e.strerror}")
        continue
      if not flags:
        problem(name, cmd, f"{cmd}: empty command line file")
        continue
    info = per_module.get(name) if isinstance(per_module.get(name), dict) else {}
    parts = pathlib.PurePosixPath(name).parts
    package = info.get("package") or (parts[0] if len(parts) > 1 else root.name)
    language = info.get("language") or _language_of(name, flags)
    split = info.get("split") or split_for(name, heldout_fraction)
    if split not in ("train", "heldout"):
      problem(name, mod_path, f"{mod_path}: module {name!r} has unknown split {split!r}")
      continue
    thin = str(root / (name + ".thinlto.bc")) if has_thinlto else None
    modules.append(CorpusModule(name=name, bc_path=str(bc), cmd_path=str(cmd),
                                cc1_flags=flags, package=package, language=language,
                                split=split, source=info.get("source"),
                                thinlto_index=thin,
                                kind=info.get("kind") or kind_of(name)))
  provenance["modules"] = "metadata" if per_module else "inferred"

  if "llvm_version" in meta:
    llvm_version = int(meta["llvm_version"])
    provenance["llvm_version"] = "metadata"
  elif producer_version is not None:
    llvm_version = producer_version
    provenance["llvm_version"] = "bitcode producer"
  else:
    llvm_version = toolchain_lib.DEFAULT_LLVM_VERSION
    provenance["llvm_version"] = "default (unknown)"
  if "opt_level" in meta:
    opt_level = str(meta["opt_level"]).lstrip("-")
    provenance["opt_level"] = "metadata"
  else:
    counts = collections.Counter(_opt_level_of(m.cc1_flags) or "O0" for m in modules)
    opt_level = counts.most_common(1)[0][0] if counts else "O0"
    provenance["opt_level"] = "cc1 flags"
  return Corpus(path=root, modules=modules, llvm_version=llvm_version, opt_level=opt_level,
                has_thinlto=has_thinlto, global_command_override=override,
                clang_version=meta.get("clang_version"), problems=problems,
                provenance=provenance, heldout_fraction=heldout_fraction)
