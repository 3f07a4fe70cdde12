"""Default trace: compile the training split with the default heuristic in the loop and
store the trajectories (features, default decisions) plus per-key baseline scores.

Problems whose channel sends the default's decision (inlining) answer it through
DefaultPolicy; the others (regalloc) compile with their tracer plugin, which keeps the
default in charge and labels every decision (mlgo.env.compile_module(trace=True)).
llc-only problems trace the prepared corpus (optimized once). With a policy dir the
trajectories are that policy's own compiles (its greedy decisions): the states a student
meets when it imitates the policy (bc.train_bc(teacher=...))."""
import pathlib
import random
import sys
import time
import zlib

import numpy as np

from mlgo.env import work
from mlgo.training import dataset
from mlgo.util.progress import Progress
from mlgo.workers import make_pool
from mlgo.workers.base import in_submission_order


def generate_default_trace(corpus_dir, problem_name: str, output, sampling_rate: float = 1.0,
                           jobs: int = 2, timeout: float = 300.0, seed: int = 0,
                           split: str = "train", pool_kind: str | None = None,
                           max_decisions_per_module: int = 0, modules=None,
                           policy_dir=None, stream=sys.stderr) -> dict:
  """max_decisions_per_module > 0 keeps a seeded uniform sample of each module's
  decisions (a few huge functions must not dominate the trace). `modules` (names)
  restricts the trace to those modules of the split. policy_dir: compile with that
  policy (greedy) in the loop instead of the default."""
  from mlgo import problems as problems_lib  # pylint: disable=import-outside-toplevel
  problem = problems_lib.get_problem(problem_name)
  ref = "trace" if problem.tracer else "default"
  if policy_dir is not None:
    teacher = work.load_policy_for(policy_dir, problem_name)
    ref = (teacher.spec, teacher.arch.w, True)
  corpus = work.corpus_for(corpus_dir, problem, jobs=jobs, stream=stream)
  modules = work.select_modules(corpus, split, modules)
  rng = random.Random(seed)
  if sampling_rate < 1.0:
    modules = [m for m in modules if rng.random() < sampling_rate]
  writer = dataset.DatasetWriter(output, problem_name, problem.features)
  writer.index.setdefault("corpus", str(corpus.path))
  writer.index.setdefault("llvm_version", corpus.llvm_version)
  # One trace, one policy in the loop: appending another's compiles would mix the labels.
  whose = str(pathlib.Path(policy_dir).resolve()) if policy_dir is not None else "default"
  recorded = writer.index.get("policy", "default" if writer.modules else whose)
  if recorded != whose:
    raise ValueError(f"{output}: holds compiles with {recorded} in the loop, not {whose} "
                     "(give another output dir)")
  writer.index["policy"] = whose
  # Appendable / resumable; modules that failed before are tried again.
  todo = [m for m in modules if not writer.modules.get(m.name, {}).get("ok")]
  who = f"policy {policy_dir}" if policy_dir is not None else "default"
  print(f"{who} trace: {len(todo)} modules to compile ({len(modules) - len(todo)} already "
        f"in {output}), problem={problem_name}, jobs={jobs}", file=stream)
  progress = Progress("trace", len(todo), stream=stream)
  stats = {"modules": 0, "failed": 0, "decisions": 0, "seconds": 0.0}
  t0 = time.monotonic()
  # Written in submission order, each module subsampled by its own seeded generator: the
  # trace is the same whichever compile finishes first, and after a resume.
  with make_pool(pool_kind, jobs) as pool:
    ids = [pool.submit(work.compile_one, m, problem_name, ref, None, corpus.llvm_version,
                       timeout) for m in todo]
    for r in in_submission_order(pool.results(), ids):
      module = r.item[0]
      info = {"package": module.package, "language": module.language}
      if not r.ok or not r.value[0].ok:
        info.update(ok=False, reason=r.failure(r.value[0].reason if r.ok else ""))
        stats["failed"] += 1
        writer.add(module.name, [], info)
        progress.update(failed=1, node=r.node)
        continue
      res = r.value[0]
      info.update(ok=True, scores=problem.scores(module.name, res.reward),
                  decisions=int(res.decisions), seconds=round(float(res.seconds), 3))
      if problem.key == "module":
        info["reward"] = _jsonable(res.reward)
      sub_rng = np.random.default_rng([seed, zlib.crc32(module.name.encode())])
      writer.add(module.name, _subsample(res.trajectories, max_decisions_per_module, sub_rng),
                 info)
      stats["modules"] += 1
      stats["decisions"] += int(res.decisions)
      progress.update(extra=f"{stats['decisions']} decisions", node=r.node)
  writer.close()
  progress.close()
  stats["seconds"] = time.monotonic() - t0
  print(f"{who} trace written to {output}: {stats['modules']} modules ok, "
        f"{stats['failed']} failed, {stats['decisions']} decisions, "
        f"{stats['seconds']:.0f}s", file=stream)
  return stats


def _subsample(trajs, limit: int, rng):
  n = sum(len(t.actions) for t in trajs)
  if not limit or n <= limit:
    return trajs
  keep = np.zeros(n, bool)
  keep[rng.choice(n, limit, replace=False)] = True
  out, pos = [], 0
  for t in trajs:
    k = keep[pos:pos + len(t.actions)]
    pos += len(t.actions)
    if k.any():
      out.append(type(t)(t.context, {f: v[k] for f, v in t.features.items()},
                         np.asarray(t.actions)[k],
                         None if t.default_actions is None else np.asarray(t.default_actions)[k]))
  return out


def _jsonable(x):
  if isinstance(x, dict):
    return {str(k): _jsonable(v) for k, v in x.items()}
  if isinstance(x, (list, tuple)):
    return [_jsonable(v) for v in x]
  if hasattr(x, "item"):
    return x.item()
  return x
