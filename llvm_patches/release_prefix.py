#!/usr/bin/env python3
"""The release-mode compiler by relinking Debian's libLLVM (no LLVM source build).

Debian's clang-22/llc-22 binaries find libLLVM.so.22.1 by RUNPATH ($ORIGIN/../lib), and
llvm-22-dev (+ libpolly-22-dev) ship every component of that library as a static archive.
This tool recompiles only LLVM's ML advisor sources (MLInlineAdvisor.cpp,
MLRegAllocEvictAdvisor.cpp, from Debian's llvm-toolchain-22 source tarball) with the
AOT-compiled models (LLVM_HAVE_TF_AOT_INLINERSIZEMODEL / _REGALLOCEVICTMODEL), links them
with the XLA AOT runtime and every other archive member into a new libLLVM.so.22.1 with
Debian's soname and symbol version, and assembles a prefix:

    bin/clang (copy of Debian's), bin/clang++ -> clang, bin/llc, bin/opt
    lib/libLLVM.so.22.1 (relinked), lib/libLLVM.so -> libLLVM.so.22.1,
    lib/libclang-cpp.so.22.1 (copy), lib/clang/22/ (copy of the resource dir)
    share/mlgo/release.json (what went in: package versions, sha256 of every input)

Then `PREFIX/bin/clang -Oz -mllvm -enable-ml-inliner=release` and
`PREFIX/bin/llc -regalloc-enable-advisor=release` use the compiled-in models, with no
environment variable, plugin or channel.

Subcommands (stdlib only: also run by the Bazel repository rule with the system python3):
  check-pins   installed Debian versions == llvm_patches/debian_pins.json, else a clear error
  check-index  the pinned sha256/size == apt's signed Sources index (when deb-src is set up)
  fetch        download (resumable) and verify the source files into CACHE/debian_llvm
  extract      extract the advisor sources from the orig tarball (cached)
  build        compile + relink + assemble a prefix (objects cached under CACHE/release_prefix)
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import source_edits  # the sibling file (also when run by a Bazel repository rule)

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT_PINS = HERE / "debian_pins.json"

# LLVM sources recompiled with a model, and the private headers they include.
ADVISOR_SOURCES = {
    "inliner": ("llvm/lib/Analysis/MLInlineAdvisor.cpp", "libLLVMAnalysis.a",
                "MLInlineAdvisor.cpp.o", "LLVM_HAVE_TF_AOT_INLINERSIZEMODEL",
                "InlinerSizeModel"),
    "evict": ("llvm/lib/CodeGen/MLRegAllocEvictAdvisor.cpp", "libLLVMCodeGen.a",
              "MLRegAllocEvictAdvisor.cpp.o", "LLVM_HAVE_TF_AOT_REGALLOCEVICTMODEL",
              "RegAllocEvictModel"),
}
# LLVM sources recompiled with an mlgo edit (source_edits.py) when that model is built in:
# {model kind: [(source, archive, member)]}.
EDITED_SOURCES = {
    "inliner": [(source_edits.FPI_SOURCE, "libLLVMAnalysis.a",
                 "FunctionPropertiesAnalysis.cpp.o"),
                (source_edits.INLINE_COST_SOURCE, "libLLVMAnalysis.a", "InlineCost.cpp.o")],
}
# Besides the two sources: the private headers next to them (a tar wildcard, '/' not
# matched), and the version script of LLVM's shared library.
EXTRA_SOURCE_FILES = (
    "llvm/lib/CodeGen/*.h",
    "llvm/tools/llvm-shlib/simple_version_script.map.in",
)
# The XLA AOT runtime files an AOT-compiled model needs (as mlgo.export.native).
XLA_RUNTIME_SOURCES = (
    "tensorflow/compiler/tf2xla/xla_compiled_cpu_function.cc",
    "xla/cpu_function_runtime.cc",
    "xla/executable_run_options.cc",
    "xla/service/custom_call_status.cc",
    "xla/service/cpu/runtime_single_threaded_matmul_f32.cc",
    "xla/service/cpu/runtime_single_threaded_matmul_f64.cc",
)
# Debian's flags for LLVM (debian/rules: -O2 -DNDEBUG, RTTI on, PIC), minus debug info.
LLVM_CXXFLAGS = ("-std=c++17", "-O2", "-DNDEBUG", "-g0", "-fPIC", "-fno-exceptions",
                 "-fvisibility-inlines-hidden", "-ffunction-sections", "-fdata-sections",
                 "-D_GNU_SOURCE", "-D_GLIBCXX_USE_CXX11_ABI=1", "-D__STDC_CONSTANT_MACROS",
                 "-D__STDC_FORMAT_MACROS", "-D__STDC_LIMIT_MACROS", "-w")
# The XLA runtime is ours to hide: nothing outside libLLVM calls it.
XLA_CXXFLAGS = ("-std=c++17", "-O2", "-DNDEBUG", "-g0", "-fPIC", "-fvisibility=hidden",
                "-ffunction-sections", "-fdata-sections", "-w")
# libLLVM.so.22.1's dependencies, in Debian's NEEDED order (sonames, no -dev packages).
SYSTEM_LIBS = ("-l:libffi.so.8", "-l:libedit.so.2", "-lm", "-l:libz3.so.4", "-l:libz.so.1",
               "-l:libzstd.so.1", "-l:libxml2.so.2", "-lrt", "-ldl", "-lpthread")
EXTRA_ARCHIVES = ("libPolly.a", "libPollyISL.a")  # Debian links Polly into libLLVM
# llvm-config lists it, but LLVM builds TableGen with DISABLE_LLVM_LINK_LLVM_DYLIB: not in
# Debian's libLLVM (its symbols would be exported extras).
NOT_IN_DYLIB = ("libLLVMTableGen.a",)
PREFIX_BINARIES = ("clang", "llc", "opt")


class Error(RuntimeError):
  pass


def log(msg):
  print(f"[release_prefix] {msg}", file=sys.stderr, flush=True)


def load_pins(path=None) -> dict:
  return json.loads(pathlib.Path(path or DEFAULT_PINS).read_text())


def mlgo_home() -> pathlib.Path:
  return pathlib.Path(os.environ.get("MLGO_HOME") or pathlib.Path.home() / ".cache" / "mlgo")


def sha256_file(path) -> str:
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
      h.update(chunk)
  return h.hexdigest()


def run(cmd, what, cwd=None, timeout=1800, env=None):
  res = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=cwd,
                       timeout=timeout, env=env)
  if res.returncode != 0:
    tail = "\n".join((res.stderr or res.stdout).strip().splitlines()[-30:])
    raise Error(f"{what} failed (exit {res.returncode}): {' '.join(map(str, cmd[:4]))} ...\n{tail}")
  return res


# ---------------------------------------------------------------------------- pins
def installed_versions(packages) -> dict:
  out = {}
  for p in packages:
    res = subprocess.run(["dpkg-query", "-W", "-f=${Status}\t${Version}", p],
                         capture_output=True, text=True)
    status, _, ver = res.stdout.partition("\t")
    out[p] = ver if res.returncode == 0 and "install ok installed" in status else None
  return out


def check_pins(pins: dict) -> dict:
  """{package: version}; Error naming every package that is missing or differs."""
  got = installed_versions(pins["binary_packages"])
  bad = [(p, v) for p, v in got.items() if v != pins["version"]]
  if bad:
    lines = [f"  {p}: installed {v or 'NOT INSTALLED'}, pinned {pins['version']}" for p, v in bad]
    raise Error(
        "the installed Debian LLVM packages differ from the pinned ones "
        f"(llvm_patches/debian_pins.json):\n" + "\n".join(lines) + "\n"
        "The relinked libLLVM must be built from exactly the archives of the clang binary it "
        "is paired with. Install the pinned version (`apt-get install "
        + " ".join(f"{p}={pins['version']}" for p, _ in bad) + "`), or, after a Debian "
        "update, move the pin: set `version` and the source files' sha256/size from "
        "`apt-cache showsrc " + pins["source_package"] + "` and rebuild.")
  return got


# --------------------------------------------------------------------------- fetch
def showsrc_checksums(pins: dict) -> dict:
  """{file name: (sha256, size)} of the pinned version in apt's signed Sources index
  (`apt-cache showsrc`; apt checked the index's signature), {} if unavailable."""
  res = subprocess.run(["apt-cache", "showsrc", pins["source_package"]],
                       capture_output=True, text=True)
  for stanza in res.stdout.split("\n\n"):
    lines = stanza.splitlines()
    if f"Version: {pins['version']}" not in lines:
      continue
    out, in_sha = {}, False
    for line in lines:
      if line.startswith("Checksums-Sha256:"):
        in_sha = True
      elif in_sha and line.startswith(" "):
        sha, size, name = line.split()
        out[name] = (sha, int(size))
      else:
        in_sha = False
    return out
  return {}


def fetch(pins: dict, kinds=("orig",), cache=None, quiet=False) -> dict:
  """Downloads (once, resumable) the pinned source files; returns {kind: path}.

  Each file is tried from every pool in debian_pins.json (the security pool 404s for the
  orig tarball, the main pool has the identical file); its sha256 must equal the pin and,
  when deb-src is configured, apt's signed Sources index.
  """
  cache = pathlib.Path(cache or mlgo_home() / "debian_llvm")
  cache.mkdir(parents=True, exist_ok=True)
  signed = showsrc_checksums(pins)
  out = {}
  for kind in kinds:
    f = pins["files"][kind]
    name, want = f["name"], f["sha256"]
    if name in signed and signed[name][0] != want:
      raise Error(f"{name}: pinned sha256 {want} differs from apt's signed Sources index "
                  f"({signed[name][0]}): update llvm_patches/debian_pins.json")
    dest = cache / name
    ok_marker = cache / (name + ".sha256-ok")
    if dest.exists() and ok_marker.exists() and ok_marker.read_text().strip() == want:
      out[kind] = dest
      continue
    part = cache / (name + ".part")
    if dest.exists():
      dest.rename(part)
    errors = []
    done = part.exists() and part.stat().st_size == f["size"] and sha256_file(part) == want
    for pool in pins["pools"]:
      if done:
        break
      url = f"{pool}/{name}"
      if not quiet:
        log(f"fetching {url} ({f['size'] / 1e6:.0f} MB; resumes a partial download)")
      res = subprocess.run(["curl", "-fsSL", "--retry", "3", "-C", "-", "-o", str(part), url],
                           capture_output=True, text=True)
      if res.returncode == 33 or "416" in res.stderr:  # range refused or past the end
        part.unlink(missing_ok=True)
        res = subprocess.run(["curl", "-fsSL", "--retry", "3", "-o", str(part), url],
                             capture_output=True, text=True)
      if res.returncode == 0 and part.exists():
        got = sha256_file(part)
        done = got == want
        if not done:
          errors.append(f"{url}: sha256 {got} != pinned {want}")
          part.unlink()
      else:
        errors.append(f"{url}: curl exit {res.returncode} {res.stderr.strip()[:200]}")
    if not done:
      raise Error(f"could not fetch {name}:\n  " + "\n  ".join(errors))
    part.rename(dest)
    ok_marker.write_text(want + "\n")
    out[kind] = dest
  return out


def extract(pins: dict, cache=None) -> pathlib.Path:
  """The advisor sources (+ private headers) of the pinned orig tarball, extracted once
  into CACHE/debian_llvm/src-<sha256[:12]>/llvm/..."""
  cache = pathlib.Path(cache or mlgo_home() / "debian_llvm")
  sha = pins["files"]["orig"]["sha256"]
  dest = cache / f"src-{sha[:12]}"
  members = ([s for s, *_ in ADVISOR_SOURCES.values()] +
             [s for edited in EDITED_SOURCES.values() for s, *_ in edited] +
             list(EXTRA_SOURCE_FILES))
  done = dest / ".complete"
  # An extraction made for a shorter member list (an older mlgo) is redone.
  if done.exists() and done.read_text().splitlines() == members:
    return dest
  tarball = fetch(pins, ("orig",), cache)["orig"]
  tmp = pathlib.Path(tempfile.mkdtemp(dir=cache, prefix="extract-"))
  try:
    top = pins["files"]["orig"]["name"][:-len(".orig.tar.xz")]  # the tarball's top dir
    run(["tar", "-xJf", tarball, "-C", tmp, "--strip-components=1", "--wildcards",
         "--no-wildcards-match-slash", *[f"{top}/{m}" for m in members]], f"extracting {len(members)} files from {tarball.name}")
    missing = [m for m in members if not list(tmp.glob(m))]
    if missing:
      raise Error(f"{tarball.name} lacks {missing}")
    (tmp / ".complete").write_text("\n".join(members) + "\n")
    if dest.exists():
      shutil.rmtree(dest)
    os.chmod(tmp, 0o755)  # mkdtemp made it private
    tmp.rename(dest)
  finally:
    if tmp.exists():
      shutil.rmtree(tmp)
  return dest


# --------------------------------------------------------------------------- build
def compiler(pins) -> str:
  cxx = pathlib.Path(pins["llvm_dir"]) / "bin" / "clang++"
  if not cxx.exists():
    raise Error(f"{cxx} missing (apt-get install clang-22)")
  return str(cxx)


def archive_names(pins) -> list[str]:
  """The static archives libLLVM.so is made of, in llvm-config's link order."""
  cfg = pathlib.Path(pins["llvm_dir"]) / "bin" / "llvm-config"
  res = run([cfg, "--link-static", "--libnames"], "llvm-config --link-static --libnames")
  names = [n for n in res.stdout.split() if n not in NOT_IN_DYLIB]
  names += [a for a in EXTRA_ARCHIVES if a not in names]
  libdir = pathlib.Path(pins["llvm_dir"]) / "lib"
  missing = [n for n in names if not (libdir / n).exists()]
  if missing:
    raise Error(f"static archives missing in {libdir}: {missing[:5]} "
                "(apt-get install llvm-22-dev libpolly-22-dev)")
  return names


class ObjectCache:
  """Compiled objects keyed by everything that determines them (compiler, flags, source
  and header contents); MLGO_HOME/release_prefix/obj. Disabled with cache_dir=None."""

  def __init__(self, cache_dir):
    self.dir = pathlib.Path(cache_dir) if cache_dir else None
    if self.dir:
      self.dir.mkdir(parents=True, exist_ok=True)

  def compile(self, cxx, cxx_id, src, flags, out, key_files=(), cwd=None):
    h = hashlib.sha256()
    # The work dir is a fresh temporary: its name is not part of the key.
    key_flags = [f.replace(str(cwd), "<work>") if cwd else f for f in flags]
    for part in (cxx_id, *key_flags, pathlib.Path(src).name, sha256_file(src),
                 *(sha256_file(f) for f in key_files)):
      h.update(part.encode() + b"\0")
    key = h.hexdigest()
    cached = self.dir / f"{key}.o" if self.dir else None
    if cached and cached.exists():
      shutil.copyfile(cached, out)
      return "cached"
    run([cxx, *flags, "-c", src, "-o", out], f"compiling {pathlib.Path(src).name}", cwd=cwd)
    if cached:
      tmp = cached.with_suffix(f".{os.getpid()}.tmp")
      shutil.copyfile(out, tmp)
      os.replace(tmp, cached)
    return "compiled"


def model_files(mdir: pathlib.Path, cls: str):
  """(header, object, metadata object) of an XLA AOT model compiled as llvm::CLS: an
  xla_aot_model output dir (policy.*) or a tools/export_policy dir (llvm_embed/CLS.*)."""
  # An export dir also holds policy.* compiled as mlgo::Policy (the plugin's): llvm_embed/
  # first.
  for d in (mdir / "llvm_embed", mdir):
    for stem in (cls, "policy"):
      files = (d / f"{stem}.h", d / f"{stem}.o", d / f"{stem}_metadata.o")
      if all(f.exists() for f in files):
        return files
  raise Error(f"{mdir}: no XLA AOT model compiled as llvm::{cls} (expected policy.h/.o/"
              f"_metadata.o, or an export dir with llvm_embed/{cls}.h/.o/_metadata.o)")


def tf_dirs(python: str = "") -> tuple[str, str]:
  """(xla_aot_runtime_src, include) of the venv's TensorFlow: --python, $MLGO_PYTHON, or
  the venv setup.sh wrote into .bazelrc.local."""
  if not python:
    python = os.environ.get("MLGO_PYTHON", "")
  if not python:
    rc = HERE.parent / ".bazelrc.local"
    for line in (rc.read_text().splitlines() if rc.exists() else []):
      if "MLGO_PYTHON=" in line:
        python = line.split("MLGO_PYTHON=", 1)[1].split()[0]
        break
  if not python:
    raise Error("TensorFlow's venv not found: give --xla_runtime/--tf_include or --python "
                "(or run ./setup.sh)")
  res = run([python, "-c", "import importlib.util as u; "
             "print(list(u.find_spec('tensorflow').submodule_search_locations)[0])"],
            "locating TensorFlow")
  root = pathlib.Path(res.stdout.strip())
  return str(root / "xla_aot_runtime_src"), str(root / "include")


def build(args) -> pathlib.Path:
  pins = load_pins(args.pins)
  versions = check_pins(pins)
  cxx = compiler(pins)
  if not args.xla_runtime or not args.tf_include:
    args.xla_runtime, args.tf_include = tf_dirs(args.python)
  cxx_id = run([cxx, "--version"], "clang++ --version").stdout.splitlines()[0]
  llvm = pathlib.Path(pins["llvm_dir"])
  src_root = pathlib.Path(args.sources).resolve() if args.sources else extract(pins)
  out = pathlib.Path(args.out).resolve()
  if out.exists():
    shutil.rmtree(out)
  work = pathlib.Path(tempfile.mkdtemp(prefix="mlgo-relink-", dir=args.tmpdir))
  cache = ObjectCache(None if args.no_object_cache else
                      pathlib.Path(args.cache_dir or mlgo_home()) / "release_prefix" / "obj")
  try:
    return _build(args, pins, versions, cxx, cxx_id, llvm, src_root, out, work, cache)
  finally:
    if not args.keep_work:
      shutil.rmtree(work, ignore_errors=True)


def _edited(src_root, rel, work, provenance) -> pathlib.Path:
  """The edited copy (source_edits.py) of SRC_ROOT/rel under WORK/edited; its sha256 goes
  into the provenance."""
  try:
    edited = source_edits.write_edited(src_root, rel, work / "edited")
  except source_edits.EditError as e:
    raise Error(str(e)) from e
  provenance.setdefault("edited_sources", {})[rel] = sha256_file(edited)
  return edited


def _build(args, pins, versions, cxx, cxx_id, llvm, src_root, out, work, cache):
  tf_src = pathlib.Path(args.xla_runtime).resolve()
  tf_inc = pathlib.Path(args.tf_include).resolve()
  # Paths inside objects: none (-g0), and __FILE__ through the prefix map.
  maps = [f"-ffile-prefix-map={work}=.", f"-ffile-prefix-map={src_root}=src",
          f"-ffile-prefix-map={tf_src}=xla", f"-ffile-prefix-map={tf_inc}=tf"]
  models = {"inliner": args.inliner_aot, "evict": args.evict_aot}
  jobs = []  # (src, flags, out, key_files)
  objs = []
  replaced = {}  # archive -> [members]
  provenance = {"debian": {"source_package": pins["source_package"], "version": pins["version"],
                           "orig_sha256": pins["files"]["orig"]["sha256"],
                           "installed": versions},
                "compiler": cxx_id, "models": {}}
  for kind, (rel, archive, member, define, cls) in ADVISOR_SOURCES.items():
    mdir = models[kind]
    if not mdir:
      continue
    h, o, meta = model_files(pathlib.Path(mdir).resolve(), cls)
    inc = work / f"model_{kind}"
    inc.mkdir()
    header = h.read_text()
    if f"class {cls} " not in header and f"class {cls}:" not in header:
      raise Error(f"{h} does not define llvm::{cls} (AOT-compile with "
                  f"--cpp_class llvm::{cls})")
    (inc / f"{cls}.h").write_text(header)
    shutil.copyfile(o, work / f"{cls}.o")
    shutil.copyfile(meta, work / f"{cls}_metadata.o")
    objs += [work / f"{cls}.o", work / f"{cls}_metadata.o"]
    provenance["models"][cls] = {f.name: sha256_file(f) for f in (h, o, meta)}
    flags = [*LLVM_CXXFLAGS, *maps, f"-D{define}", f"-I{inc}", f"-I{tf_src}", f"-I{tf_inc}",
             f"-I{llvm / 'include'}", f"-I{src_root / pathlib.Path(rel).parent}"]
    src = src_root / rel
    if rel in source_edits.EDITS:  # the advisor itself is edited (source_edits.py)
      src = _edited(src_root, rel, work, provenance)
    o = work / member
    jobs.append((src, flags, o, [inc / f"{cls}.h"]))
    objs.append(o)
    replaced.setdefault(archive, []).append(member)
    for erel, earchive, emember in EDITED_SOURCES.get(kind, ()):
      edited = _edited(src_root, erel, work, provenance)
      eflags = [*LLVM_CXXFLAGS, *maps, f"-I{llvm / 'include'}",
                f"-I{src_root / pathlib.Path(erel).parent}"]
      o = work / emember
      jobs.append((edited, eflags, o, []))
      objs.append(o)
      replaced.setdefault(earchive, []).append(emember)
  if not replaced:
    raise Error("give --inliner_aot and/or --evict_aot")
  for rel in XLA_RUNTIME_SOURCES:
    o = work / ("xla_" + pathlib.Path(rel).stem + ".o")
    jobs.append((tf_src / rel, [*XLA_CXXFLAGS, *maps, f"-I{tf_src}", f"-I{tf_inc}"], o, []))
    objs.append(o)
  with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as ex:
    # The key also holds the Debian version (LLVM headers) and the include dirs' real paths
    # (the TF dir is inside the venv, whose name changes with its pinned requirements).
    key_id = f"{cxx_id}|{pins['version']}"
    results = list(ex.map(lambda j: cache.compile(cxx, key_id, *j, cwd=work), jobs))
  log(f"{len(jobs)} objects ({results.count('cached')} from the object cache)")

  # The archives, with the recompiled members removed from copies of their archives.
  libdir = llvm / "lib"
  link_archives = []
  for name in archive_names(pins):
    if name in replaced:
      copy = work / name
      shutil.copyfile(libdir / name, copy)
      listing = run(["ar", "t", copy], f"ar t {name}").stdout.split()
      for member in replaced[name]:
        if listing.count(member) != 1:
          raise Error(f"{name} has {listing.count(member)} members {member}")
      run(["ar", "dD", copy, *replaced[name]], f"ar d {name} {' '.join(replaced[name])}")
      link_archives.append(copy)
    else:
      link_archives.append(libdir / name)
  vscript = work / "libLLVM.map"
  # LLVM's own version script for libLLVM, with Debian's symbol version.
  template = (src_root / "llvm/tools/llvm-shlib/simple_version_script.map.in").read_text()
  vscript.write_text(template.replace("@LLVM_SHLIB_SYMBOL_VERSION@", pins["symbol_version"]))
  lib = work / pins["soname"]
  # LLVM's link flags for libLLVM on Linux (llvm-shlib, HandleLLVMOptions) and Debian's
  # RUNPATH; stripped like Debian's; one linker thread so the 2-core CI keeps a core.
  link = [cxx, "-fuse-ld=lld", "-shared", "-o", lib, f"-Wl,-soname,{pins['soname']}",
          f"-Wl,--version-script,{vscript}", "-Wl,-Bsymbolic-functions", "-Wl,-z,defs",
          "-Wl,-z,nodelete", "-Wl,--build-id=sha1", "-Wl,-rpath,$ORIGIN/../lib", "-Wl,-O1",
          "-Wl,--gc-sections", "-Wl,--strip-all", "-Wl,--threads=1", *objs,
          "-Wl,--whole-archive", *link_archives, "-Wl,--no-whole-archive", *SYSTEM_LIBS]
  log(f"linking {pins['soname']} from {len(link_archives)} archives + {len(objs)} objects")
  run(link, "linking libLLVM", cwd=work)

  # The prefix.
  (out / "bin").mkdir(parents=True)
  (out / "lib").mkdir()
  for b in PREFIX_BINARIES:
    shutil.copyfile(llvm / "bin" / b, out / "bin" / b)
    os.chmod(out / "bin" / b, 0o755)
  os.symlink("clang", out / "bin" / "clang++")
  shutil.copyfile(lib, out / "lib" / pins["soname"])
  os.chmod(out / "lib" / pins["soname"], 0o644)
  os.symlink(pins["soname"], out / "lib" / "libLLVM.so")
  cpp = llvm / "lib" / "libclang-cpp.so.22.1"
  shutil.copyfile(cpp.resolve(), out / "lib" / cpp.name)
  resource = llvm / "lib" / "clang"
  shutil.copytree(resource, out / "lib" / "clang", symlinks=True)
  provenance["lib_sha256"] = sha256_file(out / "lib" / pins["soname"])
  (out / "share" / "mlgo").mkdir(parents=True)
  (out / "share" / "mlgo" / "release.json").write_text(
      json.dumps(provenance, indent=1, sort_keys=True) + "\n")
  # Same mode bits and no timestamps in the comparison; mtimes are normalized too.
  for p in sorted(out.rglob("*")):
    if not p.is_symlink():
      os.utime(p, (0, 0))
  log(f"prefix ready: {out} (lib sha256 {provenance['lib_sha256'][:16]}...)")
  return out


def manifest(prefix) -> dict:
  """{relative path: sha256 or '-> target'} of every file and symlink under prefix."""
  prefix = pathlib.Path(prefix)
  out = {}
  for p in sorted(prefix.rglob("*")):
    rel = str(p.relative_to(prefix))
    if p.is_symlink():
      out[rel] = "-> " + os.readlink(p)
    elif p.is_file():
      out[rel] = sha256_file(p)
  return out


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("command", choices=["check-pins", "check-index", "fetch", "extract", "build",
                                      "manifest"])
  ap.add_argument("--pins", default=str(DEFAULT_PINS))
  ap.add_argument("--cache_dir", default="", help="default: $MLGO_HOME (~/.cache/mlgo)")
  ap.add_argument("--kinds", default="orig", help="fetch: orig,debian,dsc")
  ap.add_argument("--out", help="build: the prefix directory; manifest: the prefix")
  ap.add_argument("--sources", default="", help="extracted advisor sources (default: extract)")
  ap.add_argument("--inliner_aot", default="", help="dir with policy.{h,o},policy_metadata.o "
                  "compiled with --cpp_class llvm::InlinerSizeModel, or an export_policy dir")
  ap.add_argument("--evict_aot", default="", help="same with llvm::RegAllocEvictModel")
  ap.add_argument("--xla_runtime", default="", help="TF's xla_aot_runtime_src dir "
                  "(default: from --python's TensorFlow)")
  ap.add_argument("--python", default="", help="the venv python (default: $MLGO_PYTHON or "
                  "the one in .bazelrc.local)")
  ap.add_argument("--tf_include", default="", help="TF's include dir")
  ap.add_argument("--jobs", type=int, default=1)
  ap.add_argument("--no_object_cache", action="store_true")
  ap.add_argument("--keep_work", action="store_true")
  ap.add_argument("--tmpdir", default=None)
  args = ap.parse_args(argv)
  pins = load_pins(args.pins)
  dl_cache = pathlib.Path(args.cache_dir) / "debian_llvm" if args.cache_dir else None
  try:
    if args.command == "check-pins":
      for p, v in check_pins(pins).items():
        print(f"{p}={v}")
    elif args.command == "check-index":
      signed = showsrc_checksums(pins)
      if not signed:
        print(f"apt has no Sources entry for {pins['source_package']}={pins['version']} "
              "(no deb-src line?): pinned checksums not cross-checked")
      for kind, f in pins["files"].items():
        if f["name"] in signed and signed[f["name"]] != (f["sha256"], f["size"]):
          raise Error(f"{f['name']}: pinned {f['sha256']} {f['size']}, apt's signed Sources "
                      f"index says {signed[f['name']][0]} {signed[f['name']][1]}")
        if f["name"] in signed:
          print(f"{kind}: {f['name']} sha256 and size match apt's signed Sources index")
    elif args.command == "fetch":
      for k, p in fetch(pins, args.kinds.split(","), dl_cache).items():
        print(f"{k}\t{p}")
    elif args.command == "extract":
      print(extract(pins, dl_cache))
    elif args.command == "build":
      if args.cache_dir and not args.sources:
        args.sources = str(extract(pins, dl_cache))
      build(args)
    elif args.command == "manifest":
      for rel, h in manifest(args.out).items():
        print(f"{h}  {rel}")
  except Error as e:
    sys.exit(f"release_prefix: error: {e}")


if __name__ == "__main__":
  main()
