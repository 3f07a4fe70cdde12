"""Prepared corpora for llc-only problems: optimize each module once, so every training
and evaluation compile runs llc only (the middle end does not depend on the policy).

From any corpus in the mlgo-utils format (ours or a user's), for every module:
  1. `clang -cc1 <module flags> -x ir NAME.bc -emit-llvm-bc`: the middle end at the
     corpus' level (-O2 for the regalloc corpus), bitcode after optimization;
  2. the llc flags that reproduce the module's code generation setup
     (modules.llc_flags_from_cc1);
  3. one reference llc compile (no channel), for the default's per-function scores and
     a check that the module compiles.
A PreparedCorpus has the interface of a corpus (modules with name/package/language/
split, split(), llvm_version, path), so the trainer and the evaluator use either.
The result is cached in mlgo_home()/prepared/<corpus hash>/ (manifest.json + bc/), keyed
by the corpus' description, its modules' flags and bitcode sizes/mtimes, and the LLVM
version; a second call returns at once. Modules that fail are listed with their reason.
"""
import dataclasses
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from mlgo import corpus as corpus_lib
from mlgo import workers
from mlgo.env import core, modules as modules_lib
from mlgo.env.policies import CompilerDefault
from mlgo.util import cli
from mlgo.util.progress import Progress
from mlgo.util.toolchain import toolchain
from mlgo.util.files import write_json_atomic

PREPARE_VERSION = 1
BASELINE_REWARD = "remarks"   # PreparedModule.baseline: regalloc_eviction's reward


@dataclasses.dataclass
class PreparedModule(modules_lib.LlcModule):
  package: str = ""
  language: str = ""
  split: str = "train"
  baseline: dict = dataclasses.field(default_factory=dict)   # function -> default score

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


def corpus_hash(corpus, llvm_version: int) -> str:
  h = hashlib.sha256()
  h.update(f"v{PREPARE_VERSION} llvm{llvm_version} {corpus.opt_level} {corpus.path.resolve()}\n"
           .encode())
  for m in sorted(corpus.modules, key=lambda m: m.name):
    st = os.stat(m.bc_path)
    h.update(f"{m.name}\0{st.st_size}\0{int(st.st_mtime)}\0{m.split}\0".encode())
    h.update("\0".join(m.cc1_flags).encode())
  return h.hexdigest()[:16]


def _prepare_item(m, llc_flags: list, llvm_version: int, timeout: float, problem: str):
  """A worker-pool work item (any node): optimize `m` to bitcode and record the default
  llc's scores. Returns (optimized bitcode bytes | None, functions | None, error, seconds)."""
  t0 = time.monotonic()
  clang = toolchain(llvm_version).clang
  with tempfile.TemporaryDirectory(prefix="mlgo-prepare-") as tmpdir:
    bc = os.path.join(tmpdir, "opt.bc")
    argv = m.compile_argv(clang, bc, action="-emit-llvm-bc")
    try:
      r = subprocess.run(argv, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
      return None, None, "clang timed out optimizing the module", time.monotonic() - t0
    if r.returncode != 0:
      tail = r.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["?"]
      return None, None, f"clang exited with {r.returncode}: {tail[0][:300]}", \
          time.monotonic() - t0
    res = core.compile_module(modules_lib.LlcModule(m.name, bc, llc_flags), problem,
                              CompilerDefault(), llvm_version=llvm_version, timeout=timeout)
    if not res.ok:
      return None, None, f"default llc failed: {res.reason}", time.monotonic() - t0
    with open(bc, "rb") as f:
      return f.read(), res.reward["functions"], None, time.monotonic() - t0


def prepare(corpus_dir, *, llvm_version: int | None = None, jobs: int = 2,
            timeout: float = 300.0, out_root=None, stream=sys.stderr,
            problem: str = "regalloc_eviction") -> PreparedCorpus:
  """Prepares (or returns the cached preparation of) the corpus at `corpus_dir`.
  `problem` names the llc problem whose reference scores are recorded (both regalloc
  problems share one reward)."""
  if isinstance(corpus_dir, PreparedCorpus):
    return corpus_dir
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
  toolchain(v)   # a missing compiler fails here, before any work
  opt = corpus.opt_level or "O2"
  todo = [m for m in corpus.modules if m.name not in done]
  print(f"prepare (llc-only compiles): {len(corpus.modules)} modules of {corpus.path} at -{opt} "
        f"(LLVM {v}) into {d}; {len(todo)} to do", file=stream, flush=True)
  progress = Progress("prepare", len(todo), stream=stream)
  flags_of = {m.name: modules_lib.llc_flags_from_cc1(m.cc1_flags, opt) for m in corpus.modules}
  bc_of = {m.name: str(d / "bc" / (m.name + ".bc")) for m in corpus.modules}
  last_save = time.monotonic()
  # On the worker pool (--workers): clusters prepare in parallel too; the optimized
  # bitcode comes back and is written here.
  with workers.make_pool(None, jobs) as pool:
    for m in todo:
      pool.submit(_prepare_item, m, flags_of[m.name], v, timeout, problem)
    for r in pool.results():
      name = r.item[0].name
      if r.ok:
        data, funcs, err, secs = r.value
      else:
        data, funcs, secs = None, None, r.seconds
        err = r.where() + (r.error or "cancelled").strip().splitlines()[-1][:300]
      if data is not None:
        out_bc = pathlib.Path(bc_of[name])
        out_bc.parent.mkdir(parents=True, exist_ok=True)
        tmp = out_bc.with_name(out_bc.name + f".tmp{os.getpid()}")
        tmp.write_bytes(data)
        os.replace(tmp, out_bc)
      done[name] = {"functions": funcs, "error": err, "seconds": round(secs, 2)}
      progress.update(failed=1 if err else 0, node=r.node)
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
  print(f"prepare: {len(modules)} modules ready, {len(failures)} failed", file=stream,
        flush=True)
  return load_prepared(d)


def load_prepared(d) -> PreparedCorpus:
  d = pathlib.Path(d)
  with open(d / "manifest.json") as f:
    m = json.load(f)
  mods = [PreparedModule(x["name"], str(d / x["bc"]), x["llc_flags"], package=x["package"],
                         language=x["language"], split=x["split"], baseline=x["baseline"])
          for x in m["modules"]]
  return PreparedCorpus(d, m["corpus"], m["llvm_version"], m["opt_level"], mods,
                        m.get("failures", {}))
