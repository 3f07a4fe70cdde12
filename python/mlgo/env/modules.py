"""Module types the environment compiles, besides corpus modules.

- Any object with `name`, `bc_path` and `compile_argv(clang, output, extra_flags,
  action=...)` (mlgo.corpus.CorpusModule, SourceModule) is compiled by clang -cc1 for
  inlining; for regalloc it is first optimized to bitcode (`-emit-llvm-bc`) by the same
  command line and then run through llc (see `llc_input`).
- `LlcModule`: middle-end-optimized bitcode plus llc flags, for the regalloc problems.
"""
import dataclasses
import os
import shlex
import subprocess
from typing import Sequence

from mlgo.util import toolchain as toolchain_lib


@dataclasses.dataclass
class SourceModule:
  """Pre-optimization bitcode and its cc1 flags (like a corpus module, without a corpus)."""
  name: str
  bc_path: str
  cc1_flags: list

  def compile_argv(self, clang: str, output: str, extra_flags: Sequence[str] = (),
                   action: str = "-emit-obj") -> list:
    from mlgo.corpus import clean_cc1_flags  # pylint: disable=import-outside-toplevel
    return ([clang] + clean_cc1_flags(self.cc1_flags) + list(extra_flags) +
            ["-x", "ir", self.bc_path, "-o", str(output), action])


@dataclasses.dataclass
class LlcModule:
  """Optimized bitcode for llc, with llc flags (e.g. ["-O2", "-relocation-model=pic"])."""
  name: str
  bc_path: str
  llc_flags: list = dataclasses.field(default_factory=list)

  def llc_argv(self, llc: str, output: str, extra_flags: Sequence[str] = (),
               filetype: str = "obj") -> list:
    """filetype "null": code generation runs to the end (allocation, remarks) but no
    object is written (give os.devnull as output)."""
    return ([llc] + list(self.llc_flags) + list(extra_flags) +
            [self.bc_path, f"-filetype={filetype}", "-o", str(output)])


def _cc1_of_driver(clang: str, args: Sequence[str]) -> list:
  out = subprocess.run([clang, "-###"] + list(args), capture_output=True, text=True)
  if out.returncode != 0:
    raise RuntimeError(f"{clang} -### failed: {out.stderr.strip()[-500:]}")
  for line in out.stderr.splitlines():
    parts = shlex.split(line)
    if "-cc1" in parts:
      return parts[parts.index("-cc1"):]
  raise RuntimeError(f"{clang} -### printed no -cc1 line")


def module_from_source(src: str, workdir: str, *, llvm_version: int = toolchain_lib.DEFAULT_LLVM_VERSION,
                       opt: str = "Oz", extra_args: Sequence[str] = ()) -> SourceModule:
  """Compiles a C/C++ source to pre-optimization bitcode (+ its cc1 flags) in `workdir`.

  The bitcode is what `clang -O<opt> -c` would optimize (frontend output with the
  optimization pipeline disabled), so compiling it with the flags reproduces
  `clang -O<opt> -c src`.
  """
  tc = toolchain_lib.toolchain(llvm_version)
  stem = os.path.splitext(os.path.basename(src))[0]
  bc = os.path.join(workdir, f"{stem}.{llvm_version}.{opt}.bc")
  args = [f"-{opt}", "-c", src, *extra_args]
  subprocess.run([tc.clang, *args, "-emit-llvm", "-Xclang", "-disable-llvm-passes",
                  "-o", bc], check=True, capture_output=True)
  flags = _cc1_of_driver(tc.clang, args + ["-o", os.path.join(workdir, stem + ".o")])
  return SourceModule(name=stem, bc_path=bc, cc1_flags=flags)


def optimized_module_from_source(src: str, workdir: str, *,
                                 llvm_version: int = toolchain_lib.DEFAULT_LLVM_VERSION,
                                 opt: str = "O2") -> LlcModule:
  """`clang -O<opt> -emit-llvm -c src` -> LlcModule for the regalloc problems."""
  tc = toolchain_lib.toolchain(llvm_version)
  stem = os.path.splitext(os.path.basename(src))[0]
  bc = os.path.join(workdir, f"{stem}.{llvm_version}.{opt}.opt.bc")
  subprocess.run([tc.clang, f"-{opt}", "-emit-llvm", "-c", src, "-o", bc], check=True,
                 capture_output=True)
  return LlcModule(name=stem, bc_path=bc, llc_flags=llc_flags_from_cc1([], opt))


def llc_flags_from_cc1(cc1_flags: Sequence[str], opt_level: str | None = None) -> list:
  """llc options reproducing the code generation setup of a cc1 command line: the -O
  level (`opt_level`, else the flags' own; the middle end's -Os/-Oz are -O2 for code
  generation), relocation model, function/data sections, address-significance table.
  Target triple, CPU and features are in the bitcode's function attributes."""
  f = list(cc1_flags)
  lvl = opt_level or next((x for x in reversed(f) if x.startswith("-O") and len(x) <= 6),
                          "-O2")
  lvl = lvl.lstrip("-").lstrip("O")
  out = ["-O" + {"s": "2", "z": "2", "": "2", "fast": "3"}.get(lvl, lvl)]
  reloc = None
  for i, x in enumerate(f):
    if x == "-mrelocation-model" and i + 1 < len(f):
      reloc = f[i + 1]
    elif x.startswith("-mrelocation-model="):
      reloc = x.split("=", 1)[1]
  if reloc:
    out.append(f"-relocation-model={reloc}")
  for cc1, llc in (("-ffunction-sections", "-function-sections"),
                   ("-fdata-sections", "-data-sections"), ("-faddrsig", "-addrsig")):
    if cc1 in f:
      out.append(llc)
  return out


def llc_input(module, workdir: str, clang: str) -> LlcModule:
  """LlcModule for `module`: itself, or its bitcode optimized by its own cc1 flags."""
  if isinstance(module, LlcModule) or (hasattr(module, "llc_flags") and
                                       not hasattr(module, "compile_argv")):
    return module
  out = os.path.join(workdir, "optimized.bc")
  argv = module.compile_argv(clang, out, action="-emit-llvm-bc")
  r = subprocess.run(argv, capture_output=True, text=True)
  if r.returncode != 0:
    raise RuntimeError(f"optimizing {module.name} to bitcode failed "
                       f"(status {r.returncode}): {r.stderr.strip()[-800:]}")
  return LlcModule(name=module.name, bc_path=out,
                   llc_flags=llc_flags_from_cc1(getattr(module, "cc1_flags", [])))


def module_from_files(bc_path: str, cmd_path: str | None = None,
                      llc_flags: Sequence[str] | None = None, name: str | None = None):
  """A module from a .bc and, for clang, its .cmd (NUL-separated cc1 flags, mlgo-utils
  format); without a .cmd the bitcode is taken as optimized input for llc."""
  name = name or os.path.splitext(os.path.basename(bc_path))[0]
  if not os.path.isfile(bc_path):
    raise FileNotFoundError(f"{bc_path}: no such bitcode file")
  if cmd_path:
    from mlgo.corpus import read_cmd  # pylint: disable=import-outside-toplevel
    return SourceModule(name=name, bc_path=str(bc_path), cc1_flags=read_cmd(str(cmd_path)))
  return LlcModule(name=name, bc_path=str(bc_path), llc_flags=list(llc_flags or ["-O2"]))
