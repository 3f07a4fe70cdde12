"""Locating (or building) the default tracer plugin for llc, cc/regalloc_trace.

Bazel builds it as //cc/regalloc_trace:libregalloc_trace.so (a data dependency of the
regalloc tools and tests). Outside Bazel, or if that file is missing, it is compiled
once from the checkout's source with the LLVM version's clang++ and cached under
mlgo_home()/plugins/<source hash>/. On a Ray node without the checkout the source
arrives with the task ($MLGO_REGALLOC_TRACE_SOURCE).
"""
import hashlib
import os
import pathlib
import subprocess

from mlgo.util import cli

_REL = "cc/regalloc_trace/libregalloc_trace.so"
_SRC = "cc/regalloc_trace/regalloc_trace.cc"


class PluginError(RuntimeError):
  pass


def _runfiles_candidates():
  return cli.runfile_candidates(_REL)


def plugin_path(llvm_version: int = 22) -> str:
  env = os.environ.get("MLGO_REGALLOC_PLUGIN")
  if env:
    if not os.path.exists(env):
      raise PluginError(f"MLGO_REGALLOC_PLUGIN={env} does not exist")
    return env
  if llvm_version == 22:
    for c in _runfiles_candidates():
      if c.exists():
        return str(c)
  return build_plugin(llvm_version)


def _source() -> pathlib.Path:
  root = cli.repo_root()
  cands = []
  shipped = os.environ.get("MLGO_REGALLOC_TRACE_SOURCE")   # a Ray node's copy (workers.ray_pool)
  if shipped:
    cands.append(pathlib.Path(shipped))
  if root:
    cands.append(root / _SRC)
  for c in _runfiles_candidates():
    cands.append(c.parent / "regalloc_trace.cc")
  for c in cands:
    if c.exists():
      return c
  raise PluginError("cannot find cc/regalloc_trace/regalloc_trace.cc to build the tracer; "
                    "build //cc/regalloc_trace:libregalloc_trace.so or set MLGO_REGALLOC_PLUGIN")


def build_plugin(llvm_version: int = 22) -> str:
  src = _source()
  data = src.read_bytes()
  h = hashlib.sha256(data + str(llvm_version).encode()).hexdigest()[:16]
  out = cli.mlgo_home() / "plugins" / h / "libregalloc_trace.so"
  if out.exists():
    return str(out)
  out.parent.mkdir(parents=True, exist_ok=True)
  inc = f"/usr/lib/llvm-{llvm_version}/include"
  cxx = f"/usr/lib/llvm-{llvm_version}/bin/clang++"
  tmp = out.with_suffix(f".tmp{os.getpid()}")
  argv = [cxx, "-std=c++17", "-O2", "-fPIC", "-shared", "-fno-rtti", "-fno-exceptions",
          f"-I{inc}", "-D_GNU_SOURCE", "-D__STDC_CONSTANT_MACROS", "-D__STDC_FORMAT_MACROS",
          "-D__STDC_LIMIT_MACROS", str(src), "-o", str(tmp)]
  r = subprocess.run(argv, capture_output=True, text=True)
  if r.returncode != 0:
    raise PluginError(f"building the regalloc tracer failed:\n{' '.join(argv)}\n{r.stderr[-2000:]}")
  os.replace(tmp, out)
  return str(out)
