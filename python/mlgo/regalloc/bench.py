"""Policy-in-the-loop llc time over plain llc time, on modules of a prepared corpus.

Each module is compiled twice, one after the other: plain llc (default allocator, no
channel) and llc with the policy answering every decision over the interactive channel
(numpy evaluator, greedy). Without a policy dir an untrained network of the problem's
architecture is used (same cost per decision as a trained one).
"""
import sys
import time

import numpy as np

from mlgo.regalloc import evaluate as eval_lib, llc_run, model as model_lib
from mlgo.training import policy_io


def _untrained(prepared, problem, mods):
  for m in mods:
    tr = llc_run.run_llc(m.bc_path, m.llc_flags, problem, None, trace=True,
                         llvm_version=prepared.llvm_version)
    if tr.ok and tr.trajectories:
      feats = {k: np.concatenate([t.features[k] for t in tr.trajectories])
               for k in tr.trajectories[0].features}
      spec = model_lib.make_spec(problem, feats)
      return spec, model_lib.init_weights(spec)
  raise RuntimeError("no module with decisions to fit an untrained policy's normalization")


def bench(prepared, problem: str, policy_dir=None, modules: int = 30, seed: int = 0,
          stream=sys.stderr) -> dict:
  mods = prepared.split("heldout") or list(prepared.modules)
  rng = np.random.default_rng(seed)
  if len(mods) > modules:
    mods = [mods[i] for i in sorted(rng.choice(len(mods), modules, replace=False))]
  if policy_dir:
    pol = policy_io.load_policy(policy_dir)
    spec, w = pol.spec, pol.arch.w
  else:
    spec, w = _untrained(prepared, problem, mods)
  plain_t = policy_t = 0.0
  decisions = ok = 0
  for m in mods:
    t0 = time.perf_counter()
    r0 = llc_run.run_llc(m.bc_path, m.llc_flags, problem, None,
                         llvm_version=prepared.llvm_version)
    t1 = time.perf_counter()
    r1 = llc_run.run_llc(m.bc_path, m.llc_flags, problem, eval_lib.make_decider(problem, spec, w),
                         llvm_version=prepared.llvm_version)
    t2 = time.perf_counter()
    if r0.ok and r1.ok:
      ok += 1
      plain_t += t1 - t0
      policy_t += t2 - t1
      decisions += r1.decisions
  extra = policy_t - plain_t
  return {"modules": ok, "plain_seconds": plain_t, "policy_seconds": policy_t,
          "ratio": policy_t / plain_t if plain_t else float("nan"), "decisions": decisions,
          "decisions_per_second_of_policy_time": decisions / policy_t if policy_t else 0.0,
          "overhead_us_per_decision": 1e6 * extra / decisions if decisions else float("nan")}
