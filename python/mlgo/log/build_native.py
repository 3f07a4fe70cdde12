"""The native log reader for programs run straight from a checkout (PYTHONPATH=python).

Under Bazel, //cc/log_reader:log_reader_py puts the extension on the path. Elsewhere
`mlgo.log` calls `load()`, which compiles cc/log_reader's sources once with the system
C++ compiler (about half a minute) into MLGO_HOME/log_reader/<key>/, the key covering the
sources, the compiler and the Python ABI, and imports the result. Without it every
interactive compile parses its observations in Python (same events, about a tenth more
CPU per compile). A failed build leaves the pure-Python reader in place and is not
retried for the same key (remove the key's directory to retry); MLGO_NATIVE_READER=0
turns the build off.
"""
import fcntl
import hashlib
import importlib.util
import os
import pathlib
import subprocess
import sys
import sysconfig

from mlgo.util import cli
from mlgo.util import cxx as cxx_util

MODULE = "mlgo_log_reader_native"
SOURCES = ("cc/log_reader/py_module.cc", "cc/log_reader/log_reader.cc",
           "cc/log_reader/json.cc")
HEADERS = ("cc/log_reader/log_reader.h", "cc/log_reader/json.h")
FAILED = "FAILED"


class BuildError(RuntimeError):
  """The extension cannot be built here (the message says why)."""


def wanted() -> bool:
  return os.environ.get("MLGO_NATIVE_READER", "1") != "0"


def _key(root: pathlib.Path, cxx: str, includes: list[str]) -> str:
  h = hashlib.sha256()
  for rel in SOURCES + HEADERS:
    h.update(rel.encode() + b"\0" + (root / rel).read_bytes())
  # The compiler's real file, its size and time stand for its version: every import
  # outside Bazel computes this key, so it must not start a process.
  real = os.path.realpath(cxx)
  st = os.stat(real)
  for part in (real, st.st_size, st.st_mtime_ns, sys.version,
               sysconfig.get_config_var("EXT_SUFFIX"), *includes):
    h.update(str(part).encode() + b"\0")
  return h.hexdigest()[:16]


def build(cache_root: pathlib.Path | None = None) -> pathlib.Path:
  """The compiled extension's path, compiled now unless cached. Raises BuildError."""
  root = cxx_util.source_root(*SOURCES, *HEADERS)
  if root is None:
    raise BuildError("cc/log_reader's sources are not beside this mlgo package")
  cxx = cxx_util.compiler()
  if cxx is None:
    raise BuildError("no C++ compiler found (set CXX, or install g++)")
  try:
    import pybind11  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise BuildError(f"pybind11 is not installed for {sys.executable}") from e
  py_include = sysconfig.get_paths()["include"]
  if not os.path.exists(os.path.join(py_include, "Python.h")):
    raise BuildError(f"{py_include}/Python.h is missing (install python3-dev)")
  includes = [str(root), pybind11.get_include(), py_include]
  out_dir = (cache_root or cli.mlgo_home() / "log_reader") / _key(root, cxx, includes)
  out = out_dir / (MODULE + sysconfig.get_config_var("EXT_SUFFIX"))
  if out.exists():
    return out
  out_dir.mkdir(parents=True, exist_ok=True)
  with open(out_dir / ".lock", "w") as lock:
    # Parallel workers import mlgo.log at the same time: one compiles, the others wait.
    fcntl.flock(lock, fcntl.LOCK_EX)
    if out.exists():
      return out
    if (out_dir / FAILED).exists():
      raise BuildError((out_dir / FAILED).read_text())
    print(f"mlgo: compiling the native log reader once, into {out_dir}", file=sys.stderr,
          flush=True)
    tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
    cmd = [cxx, "-std=c++17", "-O2", "-shared", "-fPIC", "-fvisibility=hidden",
           *(f"-I{i}" for i in includes), *(str(root / s) for s in SOURCES), "-o", str(tmp)]
    try:
      res = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired as e:  # a loaded machine: not recorded, tried again
      raise BuildError(f"{cxx} took over {e.timeout:.0f} s compiling {SOURCES[0]}") from e
    if res.returncode != 0:
      tail = "\n".join((res.stderr or res.stdout).strip().splitlines()[-15:])
      msg = (f"{cxx} failed (exit {res.returncode}) compiling {', '.join(SOURCES)} "
             f"(recorded in {out_dir / FAILED}; remove that directory to try again):\n{tail}")
      (out_dir / FAILED).write_text(msg)
      raise BuildError(msg)
    os.replace(tmp, out)
  return out


def load(cache_root: pathlib.Path | None = None):
  """Builds (once) and imports the extension as `mlgo_log_reader_native`."""
  path = build(cache_root)
  spec = importlib.util.spec_from_file_location(MODULE, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  sys.modules[MODULE] = module
  return module
