"""The release prefix is reproducible: a second, independent build outside Bazel (fresh
XLA AOT compiles of the two models, no object cache, other directories) has the same
sha256 for every file as //llvm_patches:clang_release."""
import os
import pathlib
import shutil
import subprocess
import sys

from mlgo.export import aot

PREFIX = pathlib.Path("llvm_patches/clang_release").resolve()
SCRIPT = pathlib.Path("llvm_patches/release_prefix.py").resolve()
PINS = pathlib.Path("llvm_patches/debian_pins.json").resolve()
MODELS = {"inliner": ("models/inlining_oz_small/saved_policy", "llvm::InlinerSizeModel", "inlining"),
          "evict": ("models/regalloc_eviction/saved_policy", "llvm::RegAllocEvictModel",
                    "regalloc_eviction")}


def _runfile_dir(suffix: str) -> pathlib.Path:
  """A directory of the runfiles tree (external repositories are siblings of __main__)."""
  root = pathlib.Path(os.environ.get("RUNFILES_DIR") or pathlib.Path.cwd().parent)
  for base in (root, pathlib.Path.cwd().parent, pathlib.Path.cwd() / "external"):
    p = base / suffix
    if p.exists():
      return p
  raise FileNotFoundError(suffix)


def _manifest(prefix: pathlib.Path) -> dict:
  res = subprocess.run([sys.executable, SCRIPT, "manifest", "--out", prefix],
                       capture_output=True, text=True, check=True)
  return dict(reversed(line.split("  ", 1)) for line in res.stdout.splitlines())


def test_second_build_is_identical(tmp_path):
  work = tmp_path / "elsewhere" / "build"
  work.mkdir(parents=True)
  args = []
  for kind, (sm, cls, problem) in MODELS.items():
    out = work / f"aot_{kind}"
    aot.aot_compile(pathlib.Path(sm).resolve(), out, cpp_class=cls, problem=problem)
    args.append(f"--{kind}_aot={out}")
  sources = _runfile_dir("debian_llvm22")
  xla = _runfile_dir("local_python/xla_aot")
  tf_include = _runfile_dir("local_python/tf_include")
  second = tmp_path / "second_prefix"
  res = subprocess.run(
      [sys.executable, SCRIPT, "build", "--pins", PINS, "--out", second, "--sources", sources,
       "--xla_runtime", xla, "--tf_include", tf_include, "--no_object_cache",
       "--tmpdir", work, *args], capture_output=True, text=True, timeout=900)
  assert res.returncode == 0, res.stderr[-3000:]
  first, again = _manifest(PREFIX), _manifest(second)
  shutil.rmtree(second)  # ~300 MB; pytest keeps its last temporary directories
  assert len(first) > 100 and "lib/libLLVM.so.22.1" in first
  assert {k: v for k, v in again.items() if first.get(k) != v} == {}
  assert set(first) == set(again)
