"""Regalloc corpus preparation: optimize each module once, so training compiles run llc only.

From any corpus in the mlgo-utils format (ours or a user's), for every module:
  1. `clang -cc1 <module flags> -x ir NAME.bc -emit-llvm-bc`: the middle end at the
     corpus' level (-O2 for the regalloc corpus), bitcode after optimization;
  2. the llc flags that reproduce the module's code generation setup (-O level,
     relocation model, function/data sections, address-significance table; target
     triple, CPU and features are in the bitcode's function attributes);
  3. one default llc compile, for the per-function baseline cost (remarks; see
     llc_run.remark_costs) and a check that the module compiles.
The result is cached in mlgo_home()/prepared/<corpus hash>/ (manifest.json + bc/), keyed
by the corpus' description, its modules' flags and bitcode sizes/mtimes, and the LLVM
version; a second call returns at once. Modules that fail are listed with their reason.
"""
import concurrent.futures as cf
import dataclasses
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import time

from mlgo import corpus as corpus_lib
from mlgo.regalloc import llc_run
from mlgo.util import cli
from mlgo.util.progress import Progress
from mlgo.util.toolchain import toolchain
from mlgo.util.files import write_json_atomic

PREPARE_VERSION = 1


@dataclasses.dataclass
class PreparedModule:
  name: str
  bc_path: str
  llc_flags: list
  package: str
  language: str
  split: str
  baseline: dict          # function -> default cost

  @property
  def baseline_total(self) -> float:
    return float(sum(self.baseline.values()))


@dataclasses.dataclass
class PreparedCorpus:
  path: pathlib.Path
  corpus_path: str
  llvm_version: int
  opt_level: str
  modules: list
  failures: dict

  def split(self, which: str) -> list:
    if which == "all":
      return list(self.modules)
    return [m for m in self.modules if m.split == which]

  def by_name(self) -> dict:
    return {m.name: m for m in self.modules}


def llc_flags_from_cc1(cc1_flags, opt_level: str) -> list:
  """llc options matching the module's code generation flags."""
  lvl = opt_level.lstrip("-O") if opt_level else "2"
  lvl = {"s": "2", "z": "2", "": "2", "fast": "3"}.get(lvl, lvl)
  out = [f"-O{lvl}"]
  f = list(cc1_flags)
  reloc = None
  for i, x in enumerate(f):
    if x == "-mrelocation-model" and i + 1 < len(f):
      reloc = f[i + 1]
    elif x.startswith("-mrelocation-model="):
      reloc = x.split("=", 1)[1]
  if reloc:
    out.append(f"-relocation-model={reloc}")
  if "-ffunction-sections" in f:
    out.append("-function-sections")
  if "-fdata-sections" in f:
    out.append("-data-sections")
  if "-faddrsig" in f:
    out.append("-addrsig")
  return out


def corpus_hash(corpus, llvm_version: int) -> str:
  h = hashlib.sha256()
  h.update(f"v{PREPARE_VERSION} llvm{llvm_version} {corpus.opt_level} {corpus.path.resolve()}\n"
           .encode())
  for m in sorted(corpus.modules, key=lambda m: m.name):
    st = os.stat(m.bc_path)
    h.update(f"{m.name}\0{st.st_size}\0{int(st.st_mtime)}\0{m.split}\0".encode())
    h.update("\0".join(m.cc1_flags).encode())
  return h.hexdigest()[:16]


def _prepare_one(m, out_bc: str, clang: str, llc_flags: list, llvm_version: int,
                 timeout: float):
  t0 = time.monotonic()
  os.makedirs(os.path.dirname(out_bc), exist_ok=True)
  tmp = out_bc + f".tmp{os.getpid()}"
  argv = m.compile_argv(clang, tmp, action="-emit-llvm-bc")
  try:
    r = subprocess.run(argv, capture_output=True, timeout=timeout)
  except subprocess.TimeoutExpired:
    return m.name, None, "clang timed out optimizing the module", time.monotonic() - t0
  if r.returncode != 0:
    tail = r.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["?"]
    return m.name, None, f"clang exited with {r.returncode}: {tail[0][:300]}", \
        time.monotonic() - t0
  os.replace(tmp, out_bc)
  res = llc_run.run_llc(out_bc, llc_flags, llc_run.EVICTION, None, llvm_version=llvm_version,
                        timeout=timeout)
  if not res.ok:
    return m.name, None, f"default llc failed: {res.reason}", time.monotonic() - t0
  return m.name, res.functions, None, time.monotonic() - t0


def prepare(corpus_dir, *, llvm_version: int | None = None, jobs: int = 2,
            timeout: float = 300.0, out_root=None, stream=sys.stderr) -> PreparedCorpus:
  """Prepares (or returns the cached preparation of) the corpus at `corpus_dir`."""
  corpus = corpus_lib.load_corpus(corpus_dir)
  v = int(llvm_version or corpus.llvm_version)
  corpus.check_llvm_version(v)
  key = corpus_hash(corpus, v)
  root = pathlib.Path(out_root) if out_root else cli.mlgo_home() / "prepared"
  d = root / key
  manifest = d / "manifest.json"
  if manifest.exists():
    return load_prepared(d)
  d.mkdir(parents=True, exist_ok=True)
  partial = d / "partial.json"
  done = {}
  if partial.exists():  # resume a killed preparation
    with open(partial) as f:
      done = json.load(f)
  tc = toolchain(v)
  opt = corpus.opt_level or "O2"
  todo = [m for m in corpus.modules if m.name not in done]
  print(f"regalloc prepare: {len(corpus.modules)} modules of {corpus.path} at -{opt} "
        f"(LLVM {v}) into {d}; {len(todo)} to do", file=stream, flush=True)
  progress = Progress("prepare", len(todo), stream=stream)
  flags_of = {m.name: llc_flags_from_cc1(m.cc1_flags, opt) for m in corpus.modules}
  bc_of = {m.name: str(d / "bc" / (m.name + ".bc")) for m in corpus.modules}
  last_save = time.monotonic()
  with cf.ProcessPoolExecutor(max_workers=max(1, jobs)) as ex:
    futs = [ex.submit(_prepare_one, m, bc_of[m.name], tc.clang, flags_of[m.name], v, timeout)
            for m in todo]
    for fut in cf.as_completed(futs):
      name, funcs, err, secs = fut.result()
      done[name] = {"functions": funcs, "error": err, "seconds": round(secs, 2)}
      progress.update(failed=1 if err else 0)
      if time.monotonic() - last_save > 10:
        write_json_atomic(partial, done)
        last_save = time.monotonic()
  progress.close()
  modules, failures = [], {}
  for m in corpus.modules:
    info = done[m.name]
    if info["error"]:
      failures[m.name] = info["error"]
      continue
    modules.append({"name": m.name, "bc": os.path.relpath(bc_of[m.name], d),
                    "llc_flags": flags_of[m.name], "package": m.package,
                    "language": m.language, "split": m.split,
                    "baseline": info["functions"]})
  write_json_atomic(manifest, {"version": PREPARE_VERSION, "corpus": str(corpus.path),
                               "llvm_version": v, "opt_level": opt, "modules": modules,
                               "failures": failures})
  partial.unlink(missing_ok=True)
  print(f"regalloc prepare: {len(modules)} modules ready, {len(failures)} failed", file=stream,
        flush=True)
  return load_prepared(d)


def load_prepared(d) -> PreparedCorpus:
  d = pathlib.Path(d)
  with open(d / "manifest.json") as f:
    m = json.load(f)
  mods = [PreparedModule(x["name"], str(d / x["bc"]), x["llc_flags"], x["package"],
                         x["language"], x["split"], x["baseline"]) for x in m["modules"]]
  return PreparedCorpus(d, m["corpus"], m["llvm_version"], m["opt_level"], mods,
                        m.get("failures", {}))
