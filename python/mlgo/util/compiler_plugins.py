"""Locating (or building) the compiler plugins the environment loads.

Two plugins, one way to find them:
  - REGALLOC_TRACE: llc's default tracer for register allocation (cc/regalloc_trace),
    loaded with `llc -load=`.
  - INLINE_CONTEXT: clang's inline advisor on the interactive channel with the call-site
    context features (cc/inline_plugin/interactive_plugin.cc), loaded with
    `clang -fpass-plugin=`.
Bazel builds each as a data dependency of the tools and tests that need it. Outside
Bazel, or if that file is missing, it is compiled once from the checkout's source with
the LLVM version's clang++ and cached under mlgo_home()/plugins/<source hash>/. On a Ray
node without the checkout the source and its headers arrive with the task (paths in the
plugin's environment variables, see support_files).
"""
import dataclasses
import hashlib
import os
import pathlib
import subprocess

from mlgo.util import cli


class PluginError(RuntimeError):
  pass


@dataclasses.dataclass(frozen=True)
class Plugin:
  built: str            # the Bazel output, relative to the workspace
  source: str           # its single source file, relative to the checkout
  headers: tuple        # (name, env variable) of headers it includes from its directory
  env_path: str         # env variable: use this built file
  env_source: str       # env variable: build from this source file (Ray nodes)
  what: str             # for messages
  link_llvm: bool       # link -lLLVM (a clang plugin) or leave symbols to the host (llc)


REGALLOC_TRACE = Plugin(
    built="cc/regalloc_trace/libregalloc_trace.so", source="cc/regalloc_trace/regalloc_trace.cc",
    headers=(), env_path="MLGO_REGALLOC_PLUGIN", env_source="MLGO_REGALLOC_TRACE_SOURCE",
    what="the regalloc tracer", link_llvm=False)
INLINE_CONTEXT = Plugin(
    built="cc/inline_plugin/libinline_context.so",
    source="cc/inline_plugin/interactive_plugin.cc",
    headers=(("advisor_plugin.h", "MLGO_INLINE_PLUGIN_HEADER"),
             ("context_features.h", "MLGO_INLINE_CONTEXT_HEADER")),
    env_path="MLGO_INLINE_CONTEXT_PLUGIN", env_source="MLGO_INLINE_CONTEXT_SOURCE",
    what="the inline context plugin", link_llvm=True)


def plugin_path(plugin: Plugin, llvm_version: int = 22) -> str:
  env = os.environ.get(plugin.env_path)
  if env:
    if not os.path.exists(env):
      raise PluginError(f"{plugin.env_path}={env} does not exist")
    return env
  if llvm_version == 22:
    for c in cli.runfile_candidates(plugin.built):
      if c.exists():
        return str(c)
  return build_plugin(plugin, llvm_version)


def source_path(plugin: Plugin) -> pathlib.Path:
  root = cli.repo_root()
  cands = []
  shipped = os.environ.get(plugin.env_source)
  if shipped:
    cands.append(pathlib.Path(shipped))
  if root:
    cands.append(root / plugin.source)
  name = pathlib.Path(plugin.source).name
  for c in cli.runfile_candidates(plugin.built):
    cands.append(c.parent / name)
  for c in cands:
    if c.exists():
      return c
  raise PluginError(f"cannot find {plugin.source} to build {plugin.what}; build "
                    f"//{os.path.dirname(plugin.built)}:{os.path.basename(plugin.built)} "
                    f"or set {plugin.env_path}")


def _header_path(plugin: Plugin, src: pathlib.Path, name: str, var: str) -> pathlib.Path:
  p = pathlib.Path(os.environ[var]) if os.environ.get(var) else src.parent / name
  if not p.exists():
    raise PluginError(f"{plugin.what}: header {name} not found at {p}")
  return p


def support_files(root: pathlib.Path) -> dict:
  """{environment variable: path} of every plugin's source and headers under the
  checkout `root`: what a Ray node needs to build the plugins itself."""
  out = {}
  for plugin in (REGALLOC_TRACE, INLINE_CONTEXT):
    src = root / plugin.source
    if src.exists():
      out[plugin.env_source] = src
      for name, var in plugin.headers:
        out[var] = src.parent / name
  return out


def build_plugin(plugin: Plugin, llvm_version: int = 22) -> str:
  src = source_path(plugin)
  headers = [_header_path(plugin, src, n, v) for n, v in plugin.headers]
  data = src.read_bytes() + b"".join(h.read_bytes() for h in headers)
  h = hashlib.sha256(data + str(llvm_version).encode()).hexdigest()[:16]
  out = cli.mlgo_home() / "plugins" / h / os.path.basename(plugin.built)
  if out.exists():
    return str(out)
  out.parent.mkdir(parents=True, exist_ok=True)
  inc = f"/usr/lib/llvm-{llvm_version}/include"
  cxx = f"/usr/lib/llvm-{llvm_version}/bin/clang++"
  tmp = out.with_suffix(f".tmp{os.getpid()}")
  argv = [cxx, "-std=c++17", "-O2", "-fPIC", "-shared", "-fno-rtti", "-fno-exceptions",
          f"-I{inc}", "-D_GNU_SOURCE", "-D__STDC_CONSTANT_MACROS", "-D__STDC_FORMAT_MACROS",
          "-D__STDC_LIMIT_MACROS", *sorted({f"-I{h.parent}" for h in headers}), str(src),
          "-o", str(tmp)]
  if plugin.link_llvm:
    argv += [f"-L/usr/lib/llvm-{llvm_version}/lib", "-lLLVM",
             f"-Wl,-rpath,/usr/lib/llvm-{llvm_version}/lib"]
  r = subprocess.run(argv, capture_output=True, text=True)
  if r.returncode != 0:
    raise PluginError(f"building {plugin.what} failed:\n{' '.join(argv)}\n{r.stderr[-2000:]}")
  os.replace(tmp, out)
  return str(out)
