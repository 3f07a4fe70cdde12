"""Builds the inline advisor plugin and the advisor server outside Bazel.

`tools/export_policy` ships a ready artifact to users whose policy was trained anywhere:
it compiles cc/inline_plugin/inline_plugin.cc, or the advisor server's sources
(cc/advisor_server/{main,server}.cc and cc/log_reader/{log_reader,json}.cc, with -I at the
directory holding cc/ so their "cc/..." includes resolve), against the AOT objects with the
system C++ compiler. The few XLA runtime sources a model needs are compiled once per
(TensorFlow, compiler) pair and cached under mlgo_home().
"""
import concurrent.futures
import hashlib
import os
import pathlib
import subprocess

from mlgo.export.aot import ExportError
from mlgo.util import cli
from mlgo.util import cxx as cxx_util

RUNTIME_SOURCES = (
    "tensorflow/compiler/tf2xla/xla_compiled_cpu_function.cc",
    "xla/cpu_function_runtime.cc",
    "xla/executable_run_options.cc",
    "xla/service/custom_call_status.cc",
    # Larger matmuls (e.g. the eviction network's 33 columns x hidden) call into Eigen.
    "xla/service/cpu/runtime_single_threaded_matmul_f32.cc",
    "xla/service/cpu/runtime_single_threaded_matmul_f64.cc",
)
PLUGIN_SRC = "cc/inline_plugin/inline_plugin.cc"
PLUGIN_HEADERS = ("cc/inline_plugin/advisor_plugin.h",   # included from their directory
                  "cc/inline_plugin/context_features.h")
# The advisor server: what Bazel's advisor_server macro compiles and links, as files.
SERVER_SRCS = (
    "cc/advisor_server/main.cc",
    "cc/advisor_server/server.cc",
    "cc/log_reader/log_reader.cc",
    "cc/log_reader/json.cc",
)
SERVER_HDRS = (
    "cc/advisor_server/server.h",
    "cc/log_reader/log_reader.h",
    "cc/log_reader/json.h",
)


def _tf_dirs() -> tuple[pathlib.Path, pathlib.Path]:
  import importlib.util  # pylint: disable=import-outside-toplevel
  spec = importlib.util.find_spec("tensorflow")
  if not spec or not spec.submodule_search_locations:
    raise ExportError("TensorFlow is not importable: the XLA AOT runtime sources come from "
                      "its pip package (run ./setup.sh)")
  root = pathlib.Path(list(spec.submodule_search_locations)[0])
  aot, inc = root / "xla_aot_runtime_src", root / "include"
  if not aot.is_dir() or not inc.is_dir():
    raise ExportError(f"{root}: TensorFlow package lacks xla_aot_runtime_src/ or include/")
  return aot, inc


def cxx_compiler() -> str:
  """$CXX, else g++, else clang++-22."""
  found = cxx_util.compiler()
  if found is None:
    raise ExportError("no C++ compiler found (set CXX, or install g++ or clang-22)")
  return found


def source_root(*rels: str) -> pathlib.Path:
  """The directory holding this repository's files `rels` (all of them, so one -I at it
  resolves their includes): the checkout, or the runfiles tree under Bazel."""
  root = cxx_util.source_root(*rels)
  if root is None:
    raise ExportError(f"source files {', '.join(rels)} not found together "
                      "(run from the mlgo checkout or via bazel)")
  return root


def source_file(rel: str) -> pathlib.Path:
  """A file of this repository: from the checkout, or from runfiles under Bazel."""
  return source_root(rel) / rel


def _run(cmd: list[str], what: str, timeout: float = 600):
  res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
  if res.returncode != 0:
    msg = "\n".join((res.stderr or res.stdout).strip().splitlines()[-25:])
    raise ExportError(f"{what} failed (exit {res.returncode}): {' '.join(cmd[:3])} ...\n{msg}")
  return res


def runtime_objects(cxx: str | None = None) -> list[pathlib.Path]:
  """The XLA AOT runtime as PIC objects, compiled once and cached."""
  cxx = cxx or cxx_compiler()
  aot, inc = _tf_dirs()
  ver = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout
  key = hashlib.sha256((str(aot.resolve()) + ver).encode()).hexdigest()[:16]
  cache = cli.mlgo_home() / "xla_aot_runtime" / key
  objs = [cache / (pathlib.Path(s).stem + ".o") for s in RUNTIME_SOURCES]
  if all(o.exists() for o in objs):
    return objs
  cache.mkdir(parents=True, exist_ok=True)

  def one(src_obj):
    src, obj = src_obj
    tmp = obj.with_suffix(f".{os.getpid()}.tmp.o")
    _run([cxx, "-std=c++17", "-O2", "-fPIC", "-w", f"-I{aot}", f"-I{inc}", "-c",
          str(aot / src), "-o", str(tmp)], f"compiling XLA runtime {src}")
    os.replace(tmp, obj)

  with concurrent.futures.ThreadPoolExecutor(2) as ex:
    list(ex.map(one, zip(RUNTIME_SOURCES, objs)))
  return objs


def _llvm_cxxflags(llvm_version: int) -> list[str]:
  cfg = f"/usr/lib/llvm-{llvm_version}/bin/llvm-config"
  if not os.path.exists(cfg):
    raise ExportError(f"LLVM {llvm_version} development files not found ({cfg}); "
                      f"install llvm-{llvm_version}-dev")
  flags = subprocess.run([cfg, "--cxxflags"], capture_output=True, text=True,
                         check=True).stdout.split()
  # Our code may use exceptions-free C++ either way; keep LLVM's defines and includes.
  return [f for f in flags if f.startswith(("-I", "-D", "-std"))]


def build_plugin(aot_dir, out_path, llvm_version: int = 22, cxx: str | None = None
                 ) -> pathlib.Path:
  """OUT: the inline advisor pass plugin for clang/opt of `llvm_version`."""
  cxx = cxx or cxx_compiler()
  aot_dir = pathlib.Path(aot_dir)
  aot, inc = _tf_dirs()
  out = pathlib.Path(out_path)
  out.parent.mkdir(parents=True, exist_ok=True)
  libdir = f"/usr/lib/llvm-{llvm_version}/lib"
  cmd = [cxx, "-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden",
         "-fvisibility-inlines-hidden", "-w", *_llvm_cxxflags(llvm_version),
         f"-I{aot_dir}", f"-I{aot}", f"-I{inc}",
         str(source_root(PLUGIN_SRC, *PLUGIN_HEADERS) / PLUGIN_SRC),
         str(aot_dir / "policy.o"), str(aot_dir / "policy_metadata.o"),
         *map(str, runtime_objects(cxx)),
         f"-L{libdir}", "-lLLVM", "-Wl,-z,defs", f"-Wl,-rpath,{libdir}", "-o", str(out)]
  _run(cmd, f"building the inline advisor plugin for LLVM {llvm_version}")
  return out


def build_server(aot_dir, out_path, cxx: str | None = None) -> pathlib.Path:
  """OUT: the advisor server binary (its sources and //cc/log_reader's, one compile)."""
  cxx = cxx or cxx_compiler()
  aot_dir = pathlib.Path(aot_dir)
  aot, inc = _tf_dirs()
  out = pathlib.Path(out_path)
  out.parent.mkdir(parents=True, exist_ok=True)
  root = source_root(*SERVER_SRCS, *SERVER_HDRS)
  cmd = [cxx, "-std=c++17", "-O2", "-w", f"-I{aot_dir}", f"-I{root}", f"-I{aot}", f"-I{inc}",
         *(str(root / s) for s in SERVER_SRCS), str(aot_dir / "policy.o"),
         str(aot_dir / "policy_metadata.o"), *map(str, runtime_objects(cxx)), "-o", str(out)]
  _run(cmd, "building the advisor server")
  return out


def shared_libraries(path) -> list[str]:
  """Names of the shared libraries `path` needs (ldd), e.g. to check for TensorFlow."""
  res = subprocess.run(["ldd", str(path)], capture_output=True, text=True)
  return [line.split()[0] for line in res.stdout.splitlines() if line.strip()]
