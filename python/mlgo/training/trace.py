"""Default trace: compile the training split with the default heuristic in the loop and
store the trajectories (features, default decisions) plus per-module baseline scores."""
import random
import sys
import time

from mlgo import corpus as corpus_lib
from mlgo.training import adapters, collect, dataset
from mlgo.util.progress import Progress
from mlgo.workers import make_pool


def generate_default_trace(corpus_dir, problem_name: str, output, sampling_rate: float = 1.0,
                           jobs: int = 2, timeout: float = 300.0, seed: int = 0,
                           split: str = "train", pool_kind: str = "process",
                           stream=sys.stderr) -> dict:
  from mlgo.training import envshim  # pylint: disable=import-outside-toplevel
  _, problems = envshim.env_and_problems()
  corpus = corpus_lib.load_corpus(corpus_dir)
  problem = problems.get_problem(problem_name)
  adapter = adapters.get_adapter(problem_name)
  modules = corpus.split(split) if split != "all" else list(corpus.modules)
  rng = random.Random(seed)
  if sampling_rate < 1.0:
    modules = [m for m in modules if rng.random() < sampling_rate]
  writer = dataset.DatasetWriter(output, problem_name, problem.features)
  writer.index.setdefault("corpus", str(corpus.path))
  writer.index.setdefault("llvm_version", corpus.llvm_version)
  # Appendable / resumable; modules that failed before are tried again.
  todo = [m for m in modules if not writer.modules.get(m.name, {}).get("ok")]
  print(f"default trace: {len(todo)} modules to compile ({len(modules) - len(todo)} already "
        f"in {output}), problem={problem_name}, jobs={jobs}", file=stream)
  progress = Progress("trace", len(todo), stream=stream)
  stats = {"modules": 0, "failed": 0, "decisions": 0, "seconds": 0.0}
  t0 = time.monotonic()
  with make_pool(pool_kind, jobs) as pool:
    for m in todo:
      pool.submit(collect.compile_one, m, problem_name, "default", None, corpus.llvm_version,
                  timeout)
    for r in pool.results():
      module = r.item[0]
      info = {"package": module.package, "language": module.language}
      if not r.ok or not r.value[0].ok:
        reason = (r.error or "").strip().splitlines()[-1:] if not r.ok else [r.value[0].reason]
        info.update(ok=False, reason=(reason[0] if reason else "cancelled")[:500])
        stats["failed"] += 1
        writer.add(module.name, [], info)
        progress.update(failed=1)
        continue
      res = r.value[0]
      info.update(ok=True, scores=adapter.scores(res), reward=_jsonable(res.reward),
                  decisions=int(res.decisions), seconds=round(float(res.seconds), 3))
      writer.add(module.name, res.trajectories, info)
      stats["modules"] += 1
      stats["decisions"] += int(res.decisions)
      progress.update(extra=f"{stats['decisions']} decisions")
  writer.close()
  progress.close()
  stats["seconds"] = time.monotonic() - t0
  print(f"default trace written to {output}: {stats['modules']} modules ok, "
        f"{stats['failed']} failed, {stats['decisions']} decisions, "
        f"{stats['seconds']:.0f}s", file=stream)
  return stats


def _jsonable(x):
  if isinstance(x, dict):
    return {str(k): _jsonable(v) for k, v in x.items()}
  if isinstance(x, (list, tuple)):
    return [_jsonable(v) for v in x]
  if hasattr(x, "item"):
    return x.item()
  return x
