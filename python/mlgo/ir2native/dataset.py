"""The IR2Native dataset: one row per function of each compiled corpus module.

Per module, one compile with stock clang-22 through the interactive channel
(`inlining_ir2vec`, so every decision carries the instruction-mix embeddings) with the
inliner's remarks on: mlgo.ir2native.states turns the decision stream into each
function's end-of-inlining state, and the object's symbol table gives each function's
real native size. `passes` decides which policies make the compiles: "default" answers
clang's own decision; "flip<P>" flips each default decision with probability P (seeded
per module), so the model also sees functions shaped by other inlining than the default's.

For the default pass of held-out modules (split "heldout", or any module of a corpus
without a training split) and a `final_ir` fraction of the training modules (the
baselines' scale factors need only a sample; the final IR doubles a module's cost), the
collection also compiles the module to its final (optimized) bitcode with the default heuristic and reads, per function, the final IR's instruction
count and TargetTransformInfo code-size cost (`opt -passes=print<cost-model>
-cost-kind=code-size`): the baselines the model is compared with, on the same functions.

Rows go to <out>/rows.jsonl as each module finishes (one JSON line per compile), so an
interrupted collection resumes where it stopped; failed compiles are listed in
<out>/failed.jsonl (module, pass, the compiler's reason) and counted; a resumed
collection tries them once more.
"""
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

import numpy as np

from mlgo.env import core, policies
from mlgo.ir2native import states as states_lib
from mlgo.util import toolchain
from mlgo.util.progress import Progress

PROBLEM = "inlining_ir2vec"


class FlipPolicy:
  """The default decision, flipped with probability p (seeded): other inlining."""

  def __init__(self, p: float, seed: int):
    self.p = p
    self.rng = np.random.default_rng(seed)
    self.default = policies.DefaultPolicy(PROBLEM)

  def act(self, observation):
    a = self.default.act(observation)
    return np.int64(1 - a) if self.rng.random() < self.p else a


def policy_for(pass_name: str, seed: int):
  if pass_name == "default":
    return policies.DefaultPolicy(PROBLEM)
  m = re.fullmatch(r"flip(0?\.\d+)", pass_name)
  if not m:
    raise ValueError(f"unknown pass {pass_name!r} (default or flip<P>, e.g. flip0.1)")
  return FlipPolicy(float(m.group(1)), seed)


class StateAnnotator:
  """compile_module annotator: names the decisions (remarks) and reads the object's
  per-function sizes; returns each function's end state and native size."""

  def flags(self, tmpdir):
    return states_lib.annotator_flags(tmpdir)

  def annotate(self, outputs, trajectories):
    sizes = toolchain.function_sizes(outputs["object"])
    ends = {}
    for stream in states_lib.streams(outputs, trajectories[:1]):
      ends = stream.end_states()
    return {"sizes": sizes,
            "ends": {f: (s.tolist(), src) for f, (s, src) in ends.items()}}


def final_ir_costs(module, workdir: str, timeout: float = 300.0) -> dict:
  """{function: (instructions, tti_code_size)} of the module's final IR under the default
  heuristic (module docstring)."""
  tc = toolchain.toolchain(22)
  bc = os.path.join(workdir, "final.bc")
  subprocess.run(module.compile_argv(tc.clang, bc, [], action="-emit-llvm-bc"),
                 check=True, capture_output=True, timeout=timeout)
  out = subprocess.run([tc.opt, "-disable-output", "-passes=print<cost-model>",
                        "-cost-kind=code-size", bc], check=True, capture_output=True,
                       text=True, timeout=timeout)
  return parse_cost_model(out.stdout + out.stderr)


_FN = re.compile(r"^Printing analysis 'Cost Model Analysis' for function '(.+)':$")
_COST = re.compile(r"^Cost Model: (?:Found an estimated cost of|Found costs of) "
                   r"(?:RThru:\d+ CodeSize:)?(\d+|Invalid)")


def parse_cost_model(text: str) -> dict:
  """{function: (instruction count, summed code-size cost)} from print<cost-model>."""
  out, cur = {}, None
  for line in text.splitlines():
    m = _FN.match(line)
    if m:
      cur = m.group(1)
      out[cur] = [0, 0]
      continue
    m = _COST.match(line)
    if m and cur is not None:
      out[cur][0] += 1
      out[cur][1] += 0 if m.group(1) == "Invalid" else int(m.group(1))
  return {k: tuple(v) for k, v in out.items()}


def wants_final_ir(module, fraction: float) -> bool:
  if fraction <= 0:
    return False
  if module.split != "train":
    return True
  import zlib  # pylint: disable=import-outside-toplevel
  return zlib.crc32(module.name.encode()) % 1000 < fraction * 1000


def collect_one(module, pass_name: str, seed: int, final_ir: bool, timeout: float):
  """One module, one pass: (record dict) or raises RuntimeError naming the failure."""
  res = core.compile_module(module, PROBLEM, policy_for(pass_name, seed), timeout=timeout,
                            annotator=StateAnnotator())
  # One line: failed.jsonl keeps the last line of the traceback (clang's stderr tail in
  # a reason would leave just "1 error generated.").
  if not res.ok:
    raise RuntimeError(_one_line(f"{module.name}: compile failed: {res.reason}"))
  ann = res.annotations or {}
  if "error" in ann:
    raise RuntimeError(_one_line(f"{module.name}: {ann['error']}"))
  costs = {}
  if final_ir and pass_name == "default":
    with tempfile.TemporaryDirectory(prefix="mlgo-i2n-") as tmp:
      costs = final_ir_costs(module, tmp, timeout)
  rows = []
  for fn, size in ann["sizes"].items():
    if fn not in ann["ends"]:
      continue   # no decision saw it: no IR state to learn from
    state, src = ann["ends"][fn]
    c = costs.get(fn, (None, None))
    rows.append({"function": fn, "source": src, "state": state, "native_size": size,
                 "final_instructions": c[0], "final_tti_code_size": c[1]})
  return {"module": module.name, "package": module.package, "split": module.split,
          "pass": pass_name, "decisions": res.decisions, "text_size": sum(ann["sizes"].values()),
          "rows": rows}


def _one_line(text: str) -> str:
  return " | ".join(l.strip() for l in text.strip().splitlines() if l.strip())


def collect(modules, out_dir, *, passes=("default",), final_ir: float = 0.25, seed: int = 0,
            jobs: int | None = None, pool: str | None = None, timeout: float = 300.0,
            stream=sys.stderr) -> dict:
  """Collects (resumably) rows for `modules` x `passes` into out_dir; returns counts."""
  from mlgo.workers import make_pool  # pylint: disable=import-outside-toplevel
  out = pathlib.Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  for name in ("rows.jsonl", "failed.jsonl"):
    _drop_cut_line(out / name)   # else the first appended record would continue it
  done = {(r["module"], r["pass"]) for r in iter_records(out)}
  todo = [(m, p) for p in passes for m in modules if (m.name, p) not in done]
  stats = {"compiles": len(done), "failed": 0, "rows": 0, "skipped_done": len(done)}
  progress = Progress("ir2native collect", len(todo), stream=stream)
  with open(out / "rows.jsonl", "a") as fr, open(out / "failed.jsonl", "a") as ff, \
      make_pool(pool, jobs) as workers:
    for m, p in todo:
      workers.submit(collect_one, m, p, _seed(seed, m.name, p),
                     wants_final_ir(m, final_ir), timeout)
    for r in workers.results():
      m, p = r.item[0], r.item[1]
      if not r.ok:
        stats["failed"] += 1
        ff.write(json.dumps({"module": m.name, "pass": p,
                             "error": r.error.strip().splitlines()[-1][:300]}) + "\n")
        ff.flush()
        progress.update(failed=1)
        continue
      rec = r.value
      fr.write(json.dumps(rec) + "\n")
      fr.flush()
      stats["compiles"] += 1
      stats["rows"] += len(rec["rows"])
      progress.update(extra=f"{stats['rows']} functions")
  progress.close()
  return stats


def _drop_cut_line(path):
  """Truncates a file after its last newline (a line cut by a kill)."""
  if not path.exists():
    return
  with open(path, "rb+") as f:
    data = f.read()
    if data and not data.endswith(b"\n"):
      f.truncate(data.rfind(b"\n") + 1)


def _seed(seed, name, p):
  import zlib  # pylint: disable=import-outside-toplevel
  return (seed * 1000003 + zlib.crc32(f"{name}|{p}".encode())) % (2**31)


def iter_records(out_dir):
  path = pathlib.Path(out_dir) / "rows.jsonl"
  if not path.exists():
    return
  with open(path) as f:
    for i, line in enumerate(f):
      if not line.endswith("\n"):
        return   # a line cut by a kill: that module is collected again
      try:
        yield json.loads(line)
      except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{i + 1}: not a JSON record ({e})") from e


def load(out_dirs, *, splits=None, passes=None) -> dict:
  """Column arrays of the rows of one or more dataset dirs (filtered by split/pass)."""
  cols = {k: [] for k in ("module", "package", "split", "pass", "function", "source",
                          "state", "native_size", "final_instructions",
                          "final_tti_code_size")}
  if isinstance(out_dirs, (str, os.PathLike)):
    out_dirs = [out_dirs]
  for d in out_dirs:
    for rec in iter_records(d):
      if splits and rec["split"] not in splits or passes and rec["pass"] not in passes:
        continue
      for row in rec["rows"]:
        for k in ("module", "package", "split", "pass"):
          cols[k].append(rec[k])
        for k in ("function", "source", "state", "native_size", "final_instructions",
                  "final_tti_code_size"):
          cols[k].append(row[k])
  out = {k: np.asarray(v, dtype=object) for k, v in cols.items()}
  out["state"] = np.asarray(cols["state"], np.float64).reshape(len(cols["state"]), -1) \
      if cols["state"] else np.zeros((0, 0))
  out["native_size"] = np.asarray(cols["native_size"], np.float64)
  for k in ("final_instructions", "final_tti_code_size"):
    out[k] = np.array([np.nan if v is None else v for v in cols[k]], np.float64)
  return out
