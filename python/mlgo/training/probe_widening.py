"""Widening rollout probes: the same probes, recorded with every feature of a wider problem.

Probes store only the features of the policy that was probed. A policy of a problem
whose compiler sends more (e.g. inlining_ir2vec) can train on them once each state is
recorded again with all its features, by re-running the probed policy's greedy compile
of each module (one compile per module, not one per probe). Separate from rollouts.py:
it reads finished probe dirs and never flips a decision.

  widen_probes(...) -> a probe dir like DIR, with every feature of the wider problem
"""
import sys

import numpy as np

from mlgo.policy import policy_io
from mlgo.training import rollouts


def _widen_module(module, spec: dict, weights: dict, problem_name: str, positions,
                  probe_rows, anchors: int, llvm_version: int, timeout: float, seed: int):
  """Runs in a worker: the probed policy's greedy compile again, under `problem_name`
  (a problem whose compiler sends more features), recording every feature it sends."""
  from mlgo import env, problems  # pylint: disable=import-outside-toplevel
  problem = problems.get_problem(problem_name)
  policy = policy_io.Policy(spec, weights, greedy=True)
  names = [f.name for f in problem.features]
  rows = []

  class Recorder:
    def act(self, obs):
      rows.append(np.concatenate([np.asarray(obs[n], np.float64).reshape(-1) for n in names]))
      return policy.act(obs)
  r = env.compile_module(module, problem, Recorder(), llvm_version=llvm_version,
                         timeout=timeout)
  if not r.ok:
    return {"failed": f"greedy compile: {r.reason}"}
  n = len(rows)
  width = sum(int(np.prod(f.shape)) for f in problem.features)
  full = np.array(rows) if n else np.zeros((0, width))
  # The columns the probed policy saw must be where the probes were taken: the same
  # compile, so the same states (a stale --policy shows up here as mismatches).
  cols, at = [], 0
  for f in problem.features:
    k = int(np.prod(f.shape))
    if f.name in policy.input_names:
      cols.append((policy.input_names.index(f.name), at, k))
    at += k
  order = np.concatenate([np.arange(a, a + k) for _, a, k in sorted(cols)])
  positions = np.asarray(positions, np.int64)
  ok = np.array([p < n and np.array_equal(full[p, order], probe_rows[j])
                 for j, p in enumerate(positions)], bool)
  wide = np.zeros((len(positions), width))
  wide[ok] = full[positions[ok]]
  rng = rollouts.module_rng(module.name, seed)
  take = rng.choice(n, size=min(anchors, n), replace=False) if n else np.zeros(0, np.int64)
  return {"rows": wide, "ok": ok, "anchor_features": full[take], "decisions": n}


def widen_probes(src_dir, corpus_dir, problem_name: str, output, *, policy_dir=None,
                 anchors: int = 200, jobs: int | None = None, timeout: float = 300.0,
                 seed: int = 0, pool: str | None = None, stream=sys.stderr) -> dict:
  """Copies the probes of `src_dir` into `output` with every feature `problem_name`'s
  compiler sends (e.g. "inlining_ir2vec"), by re-running each module's greedy compile
  of the probed policy (one compile per module, not one per probe). A probe whose state
  is not found again is marked a mismatch (not trained on) and counted."""
  from mlgo import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
  from mlgo.util.progress import Progress  # pylint: disable=import-outside-toplevel
  from mlgo.workers import make_pool  # pylint: disable=import-outside-toplevel
  src = rollouts.ProbeStore(src_dir)
  policy_dir = policy_dir or src.index["policy"]
  policy = policy_io.load_policy(policy_dir)
  if src.index["features"] != policy.input_names:
    raise ValueError(f"{policy_dir}: not the policy probed in {src_dir} (other features)")
  from mlgo import problems  # pylint: disable=import-outside-toplevel
  problem = problems.get_problem(problem_name)
  wide_names = [f.name for f in problem.features]
  missing = [n for n in policy.input_names if n not in wide_names]
  if missing:
    raise ValueError(f"problem {problem_name!r} does not send {missing[:3]}")
  corpus = corpus_lib.load_corpus(corpus_dir)
  by_name = {m.name: m for m in corpus.modules}
  out = rollouts.ProbeStore(output, wide_names, f"{policy_dir} (widened from {src_dir})")
  out.index["widened_from"] = str(src_dir)
  recs = {}
  for shard in src.shards():
    for i, name in enumerate(shard["module_names"]):
      name = str(name)
      if name in out.index["done"]:
        continue
      m = shard["probe_module"] == i
      if "probe_attributed" in shard and shard["probe_attributed"][m].any():
        # Their states are the flipped compiles', which a greedy replay does not see.
        raise ValueError(f"{src_dir}: module {name} has probes of several flips a "
                         f"compile (probe_attributed); widening replays the greedy "
                         f"compile only: probe the wider policy instead")
      recs[name] = {k: shard[k][m] for k in ("positions", "margins", "probe_actions",
                                             "probe_sizes", "mismatch", "probe_features")}
      recs[name]["probe_alternatives"] = rollouts.probe_alternatives(shard)[m]
      for k in ("probe_key_base", "probe_key_scores"):
        if k in shard:
          recs[name][k] = shard[k][m]
      recs[name]["base_size"] = float(shard["base_size"][i])
  stats = {"modules": 0, "failed": 0, "probes": 0, "mismatch": 0}
  prog = Progress("widen", len(recs), stream=stream)
  with make_pool(pool, jobs) as p:
    for name, rec in recs.items():
      if name not in by_name:
        out.mark_failed(name, f"not in corpus {corpus_dir}")
        stats["failed"] += 1
        continue
      p.submit(_widen_module, by_name[name], policy.spec, policy.arch.w, problem_name,
               rec["positions"], rec["probe_features"], anchors, corpus.llvm_version,
               timeout, seed)
    for r in p.results():
      name = r.item[0].name
      if not r.ok or "failed" in (r.value or {}):
        out.mark_failed(name, r.value["failed"] if r.ok else str(r.error)[-300:])
        stats["failed"] += 1
        prog.update(failed=1, node=r.node)
        continue
      rec, w = recs[name], r.value
      mismatch = rec["mismatch"] | ~w["ok"]
      out.add({"module": name, "base_size": rec["base_size"], "decisions": w["decisions"],
               "positions": rec["positions"], "margins": rec["margins"],
               "probe_actions": rec["probe_actions"],
               "probe_alternatives": rec["probe_alternatives"], "probe_sizes": rec["probe_sizes"],
               "mismatch": mismatch, "probe_features": w["rows"],
               "anchor_features": w["anchor_features"],
               "anchor_actions": np.zeros(len(w["anchor_features"]), np.int64),
               "failures": [],
               **{k: rec[k] for k in ("probe_key_base", "probe_key_scores") if k in rec}})
      stats["modules"] += 1
      stats["probes"] += len(mismatch)
      stats["mismatch"] += int((~w["ok"]).sum())
      if len(out.pending) >= 25:
        out.flush()
      prog.update(node=r.node)
  out.flush()
  out.save()
  prog.close()
  print("widen probes: " + " ".join(f"{k}={v}" for k, v in stats.items()), file=stream)
  return stats
