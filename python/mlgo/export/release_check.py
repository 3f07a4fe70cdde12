"""Does a release plugin give the sizes its evaluation measured?

A trained inlining policy is evaluated in training mode (clang talks to Python over the
interactive channel); users run the exported plugin (XLA AOT inside clang, no Python).
This compiles the modules of an evaluation again, plain `clang -cc1` with the module's
own flags plus the plugin (and the flags the export asks for, e.g. IR2Vec's vocabulary),
and compares each module's .text with the evaluation's policy column: every module should
be the same to the byte.

Inputs: an export dir (tools/export_policy: export.json names the plugin and its flags)
and an evaluation dir (tools/evaluate: per_key.csv, summary.json naming the corpus).
"""
from __future__ import annotations

import csv
import dataclasses
import json
import os
import pathlib
import sys

from mlgo.corpus import baseline
from mlgo.corpus import format as fmt

CSV_FIELDS = ["module", "package", "evaluation", "plugin", "status", "reason"]


class ReleaseCheckError(ValueError):
  """An input that cannot be checked (missing files, a non-inlining export...)."""


@dataclasses.dataclass
class Row:
  module: str
  package: str
  evaluation: int
  plugin: int | None
  status: str           # same | different | failed
  reason: str = ""


@dataclasses.dataclass
class Result:
  rows: list[Row]
  plugin: str
  flags: list[str]

  def count(self, status: str) -> int:
    return sum(r.status == status for r in self.rows)

  @property
  def ok(self) -> bool:
    return bool(self.rows) and self.count("same") == len(self.rows)

  def summary(self) -> str:
    ev = sum(r.evaluation for r in self.rows)
    pl = sum(r.plugin or 0 for r in self.rows if r.status != "failed")
    return (f"release_check: modules={len(self.rows)} same={self.count('same')} "
            f"different={self.count('different')} failed={self.count('failed')} "
            f"evaluation_text={ev} plugin_text={pl}")

  def write(self, out_dir) -> pathlib.Path:
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "release_check.csv", "w", newline="") as f:
      wr = csv.DictWriter(f, fieldnames=CSV_FIELDS)
      wr.writeheader()
      wr.writerows(dataclasses.asdict(r) for r in self.rows)
    (out / "release_check.json").write_text(json.dumps(
        {"plugin": self.plugin, "flags": self.flags, "modules": len(self.rows),
         "same": self.count("same"), "different": self.count("different"),
         "failed": self.count("failed"), "summary": self.summary()}, indent=1) + "\n")
    return out


def read_export(export_dir) -> tuple[str, list[str]]:
  """(plugin path for LLVM 22, extra clang flags) from an export_policy output dir."""
  d = pathlib.Path(export_dir)
  man = d / "export.json"
  if not man.is_file():
    raise ReleaseCheckError(f"{man}: missing; is {d} an export_policy output dir?")
  try:
    m = json.loads(man.read_text())
    rel = m["files"].get("plugin_llvm22")
    problem = m["problem"]
  except (ValueError, KeyError, AttributeError) as e:
    raise ReleaseCheckError(f"{man}: not an export manifest ({e})") from e
  if not problem.startswith("inlining"):
    raise ReleaseCheckError(f"{man}: a {problem} export; only inline advisor plugins "
                            f"are checked here")
  if not rel:
    raise ReleaseCheckError(f"{man}: no LLVM 22 plugin in this export "
                            f"({m.get('checks', {}).get('plugin_llvm22', 'not built')})")
  plugin = d / rel
  if not plugin.is_file():
    raise ReleaseCheckError(f"{plugin}: named by {man} but missing")
  flags = m.get("checks", {}).get("clang_flags", "").split()
  # clang_flags are driver-style (-mllvm X); -cc1 takes them as they are.
  return str(plugin.resolve()), flags


def read_evaluation(eval_dir) -> tuple[dict, dict[str, int]]:
  """(summary.json, module -> the policy's .text) for the modules the evaluation compiled."""
  d = pathlib.Path(eval_dir)
  try:
    summary = json.loads((d / "summary.json").read_text())
  except (OSError, ValueError) as e:
    raise ReleaseCheckError(f"{d / 'summary.json'}: cannot read ({e})") from e
  sizes = {}
  try:
    with open(d / "per_key.csv", newline="") as f:
      for i, row in enumerate(csv.DictReader(f), start=2):
        pol = row.get("policy") or ""
        if not pol:
          continue   # a module that failed in the evaluation has nothing to compare
        try:
          sizes[row["module"]] = int(float(pol))
        except (ValueError, KeyError) as e:
          raise ReleaseCheckError(f"{d / 'per_key.csv'} line {i}: bad policy size "
                                  f"{pol!r}") from e
  except OSError as e:
    raise ReleaseCheckError(f"{d / 'per_key.csv'}: cannot read ({e})") from e
  if not sizes:
    raise ReleaseCheckError(f"{d / 'per_key.csv'}: no module with a policy size")
  return summary, sizes


def check_release(export_dir, eval_dir, *, corpus=None, every: int = 1, jobs: int = 2,
                  timeout: float = 300.0, stream=None) -> Result:
  """Compiles every `every`-th module of the evaluation with the plugin and compares."""
  if every < 1:
    raise ReleaseCheckError(f"every must be >= 1, not {every}")
  plugin, flags = read_export(export_dir)
  summary, sizes = read_evaluation(eval_dir)
  path = corpus or summary.get("corpus")
  if not path:
    raise ReleaseCheckError(f"{eval_dir}: summary.json names no corpus; pass one")
  corp = fmt.load_corpus(path)
  by_name = {m.name: m for m in corp.modules}
  missing = sorted(set(sizes) - set(by_name))
  if missing:
    raise ReleaseCheckError(f"{corp.path}: {len(missing)} modules of {eval_dir} are not in "
                            f"this corpus (first: {missing[0]})")
  names = sorted(sizes)[::every]
  extra = [f"-fpass-plugin={plugin}", *flags]
  rep = baseline.run_baseline(corp, jobs=jobs, stream=stream or sys.stderr, timeout=timeout,
                              modules=[by_name[n] for n in names], pool_kind="process",
                              extra_flags=extra, label="release plugin")
  got = {r.module: r for r in rep.results}
  rows = []
  for n in names:
    r = got[n]
    if not r.ok:
      rows.append(Row(n, r.package, sizes[n], None, "failed", r.reason or ""))
    else:
      rows.append(Row(n, r.package, sizes[n], r.text_size,
                      "same" if r.text_size == sizes[n] else "different"))
  return Result(rows, plugin, flags)
