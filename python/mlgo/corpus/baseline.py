"""The default heuristic's numbers on a corpus: per-module .text size, totals, failures.

Every trained inliner is compared to this: each module is compiled by plain
`clang -cc1` at the corpus' optimization level from its bitcode
(`CorpusModule.compile_argv`), .text is read from the object's ELF section headers.
"""
from __future__ import annotations

import collections
import csv
import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from mlgo import workers
from mlgo.corpus import format as fmt
from mlgo.util import progress as progress_lib
from mlgo.util import toolchain as toolchain_lib

CSV_FIELDS = ["module", "package", "language", "split", "kind", "status", "text_size",
              "seconds", "reason"]


@dataclasses.dataclass
class ModuleResult:
  module: str
  package: str
  language: str
  split: str
  ok: bool
  kind: str = "library"
  text_size: int | None = None
  seconds: float = 0.0
  reason: str | None = None


@dataclasses.dataclass
class Report:
  corpus: str
  llvm_version: int
  opt_level: str
  results: list[ModuleResult]
  seconds: float

  @property
  def ok(self) -> list[ModuleResult]:
    return [r for r in self.results if r.ok]

  @property
  def failures(self) -> list[ModuleResult]:
    return [r for r in self.results if not r.ok]

  @property
  def total_text(self) -> int:
    return sum(r.text_size for r in self.ok)

  def totals_by(self, key: str) -> dict[str, dict]:
    out: dict[str, dict] = collections.OrderedDict()
    for r in sorted(self.results, key=lambda r: getattr(r, key)):
      t = out.setdefault(getattr(r, key), {"modules": 0, "failed": 0, "text_size": 0})
      t["modules"] += 1
      if r.ok:
        t["text_size"] += r.text_size
      else:
        t["failed"] += 1
    return out

  def sizes(self) -> dict[str, int]:
    """module name -> .text size of the default heuristic (successful modules)."""
    return {r.module: r.text_size for r in self.ok}

  def format(self, max_failures: int = 20) -> str:
    lines = [f"baseline (default heuristic, LLVM {self.llvm_version}, -{self.opt_level}) "
             f"on {self.corpus}"]
    for key, title in (("language", "language"), ("kind", "kind"), ("package", "package")):
      lines.append(f"{title:<12} {'modules':>8} {'failed':>7} {'.text bytes':>14}")
      for k, t in self.totals_by(key).items():
        lines.append(f"{k:<12} {t['modules']:>8} {t['failed']:>7} {t['text_size']:>14,}")
    fails = self.failures
    if fails:
      lines.append(f"failures ({len(fails)}):")
      for r in fails[:max_failures]:
        lines.append(f"  {r.module}: {r.reason}")
      if len(fails) > max_failures:
        lines.append(f"  ... {len(fails) - max_failures} more in the CSV")
    lines.append(f"total .text: {self.total_text:,} bytes over {len(self.ok)} modules "
                 f"({len(fails)} failed) in {self.seconds:.0f}s")
    return "\n".join(lines)

  def write(self, out_dir: str | os.PathLike) -> pathlib.Path:
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / "baseline.csv"
    with open(csv_path, "w", newline="") as f:
      w = csv.writer(f)
      w.writerow(CSV_FIELDS)
      for r in self.results:
        w.writerow([r.module, r.package, r.language, r.split, r.kind,
                    "ok" if r.ok else "failed",
                    "" if r.text_size is None else r.text_size, f"{r.seconds:.3f}",
                    r.reason or ""])
    summary = {"corpus": self.corpus, "llvm_version": self.llvm_version,
               "opt_level": self.opt_level, "total_text_size": self.total_text,
               "modules_ok": len(self.ok), "modules_failed": len(self.failures),
               "seconds": round(self.seconds, 1),
               "by_language": self.totals_by("language"),
               "by_kind": self.totals_by("kind"),
               "by_package": self.totals_by("package")}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return csv_path


def read_csv(path: str | os.PathLike) -> dict[str, int]:
  """module -> .text size from a baseline.csv (successful modules only)."""
  with open(path, newline="") as f:
    return {row["module"]: int(row["text_size"]) for row in csv.DictReader(f)
            if row["status"] == "ok"}


def _one_line(text: str) -> str:
  lines = [l.strip() for l in text.splitlines() if l.strip()]
  for l in lines:
    if "error" in l.lower():
      return l[:300]
  return lines[0][:300] if lines else ""


def compile_module(m: fmt.CorpusModule, clang: str, workdir: str, index: int,
                   timeout: float = 300.0,
                   extra_flags=()) -> ModuleResult:
  """Default-heuristic compile of one module; failures are results, never exceptions."""
  obj = os.path.join(workdir, f"m{index}.o")
  res = ModuleResult(m.name, m.package, m.language, m.split, ok=False, kind=m.kind)
  t0 = time.monotonic()
  try:
    r = subprocess.run(m.compile_argv(clang, obj, extra_flags), capture_output=True,
                       text=True, errors="replace", timeout=timeout)
    res.seconds = time.monotonic() - t0
    if r.returncode != 0:
      res.reason = (f"clang exited with {r.returncode}: "
                    f"{_one_line(r.stderr) or 'no message'}")
      return res
    res.text_size = toolchain_lib.text_size(obj)
    res.ok = True
  except subprocess.TimeoutExpired:
    res.seconds = time.monotonic() - t0
    res.reason = f"timed out after {timeout:.0f}s"
  except (OSError, ValueError) as e:
    res.seconds = time.monotonic() - t0
    res.reason = str(e).splitlines()[0] if str(e) else type(e).__name__
  finally:
    try:
      os.unlink(obj)
    except OSError:
      pass
  return res


def baseline_item(m: fmt.CorpusModule, llvm_version: int, timeout: float = 300.0,
                  extra_flags=()) -> ModuleResult:
  """A worker-pool work item: compile_module with this node's clang and a private dir."""
  tc = toolchain_lib.toolchain(llvm_version)
  with tempfile.TemporaryDirectory(prefix="mlgo-baseline-") as work:
    return compile_module(m, tc.clang, work, 0, timeout, extra_flags)


def run_baseline(corpus: fmt.Corpus | str | os.PathLike, jobs: int = 2,
                 llvm_version: int | None = None, stream=None, timeout: float = 300.0,
                 modules=None, pool_kind: str | None = None, extra_flags=(),
                 label: str = "baseline") -> Report:
  """Compiles every module of `corpus` with the default heuristic on a worker pool
  (`pool_kind`, default: --workers; `jobs` at a time on a local pool). `extra_flags` go
  to every clang -cc1 (e.g. a release plugin: mlgo.export.release_check)."""
  if not isinstance(corpus, fmt.Corpus):
    corpus = fmt.load_corpus(corpus)
  version = int(llvm_version or corpus.llvm_version)
  corpus.check_llvm_version(version)
  toolchain_lib.toolchain(version)   # a missing compiler fails here, before any work
  stream = stream or sys.stderr
  todo = list(modules if modules is not None else corpus.modules)
  results: list[ModuleResult] = []
  for p in corpus.problems:
    info = fmt.split_for(p.name, corpus.heldout_fraction)
    parts = pathlib.PurePosixPath(p.name).parts
    results.append(ModuleResult(p.name, parts[0] if len(parts) > 1 else corpus.path.name,
                                "?", info, ok=False, kind=fmt.kind_of(p.name),
                                reason=p.message))
  t0 = time.monotonic()
  prog = progress_lib.Progress(label, len(todo), stream=stream)
  total = 0
  with workers.make_pool(pool_kind, jobs) as pool:
    for m in todo:
      pool.submit(baseline_item, m, version, timeout, tuple(extra_flags))
    for r in pool.results():
      if r.ok:
        res = r.value
      else:   # the worker (or its node) died: the module fails, the report goes on
        m = r.item[0]
        res = ModuleResult(m.name, m.package, m.language, m.split, ok=False, kind=m.kind,
                           reason=(r.error or "cancelled").strip().splitlines()[-1][:300])
      results.append(res)
      total += res.text_size or 0
      prog.update(1, 0 if res.ok else 1, extra=f".text {total:,} B", node=r.node)
  if todo and getattr(prog, "_tty", False):
    prog.close()  # a log already got the final line from update()
  results.sort(key=lambda r: r.module)
  return Report(corpus=str(corpus.path), llvm_version=version, opt_level=corpus.opt_level,
                results=results, seconds=time.monotonic() - t0)
