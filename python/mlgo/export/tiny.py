"""Small deterministic policies in the training format (policy.json, weights.npz,
saved_policy/), used to test and benchmark the release path before, or independently
of, a trained policy. Written with mlgo.training's own saver so the format is the real one.
"""
import pathlib

import numpy as np

# The compiler's feature lists (what LLVM 22's interactive headers announce), used when
# mlgo.problems is not importable. Inlining excludes `inlining_default` (the heuristic's
# answer, sent only with -inliner-interactive-include-default).
_INLINING = [
    "sroa_savings", "sroa_losses", "load_elimination", "call_penalty", "call_argument_setup",
    "load_relative_intrinsic", "lowered_call_arg_setup", "indirect_call_penalty",
    "jump_table_penalty", "case_cluster_penalty", "switch_default_dest_penalty",
    "switch_penalty", "unsimplified_common_instructions", "num_loops", "dead_blocks",
    "simplified_instructions", "constant_args", "constant_offset_ptr_args", "callsite_cost",
    "cold_cc_penalty", "last_call_to_static_bonus", "is_multiple_blocks", "nested_inlines",
    "nested_inline_cost_estimate", "threshold", "callee_basic_block_count", "callsite_height",
    "node_count", "nr_ctant_params", "cost_estimate", "edge_count", "caller_users",
    "caller_conditionally_executed_blocks", "caller_basic_block_count",
    "callee_conditionally_executed_blocks", "callee_users", "is_callee_avail_external",
    "is_caller_avail_external"]
_EVICT_INT = {"mask", "is_free", "is_hint", "is_local", "max_stage", "min_stage"}
_EVICTION = [
    "mask", "is_free", "nr_urgent", "nr_broken_hints", "is_hint", "is_local",
    "nr_rematerializable", "nr_defs_and_uses", "weighed_reads_by_max", "weighed_writes_by_max",
    "weighed_read_writes_by_max", "weighed_indvars_by_max", "hint_weights_by_max",
    "start_bb_freq_by_max", "end_bb_freq_by_max", "hottest_bb_freq_by_max", "liverange_size",
    "use_def_density", "max_stage", "min_stage"]

BUILTIN_FEATURES = {
    "inlining": [{"name": n, "dtype": "int64", "shape": [1]} for n in _INLINING],
    "regalloc_eviction": [{"name": n, "dtype": "int64" if n in _EVICT_INT else "float32",
                           "shape": [1, 33]} for n in _EVICTION]
                         + [{"name": "progress", "dtype": "float32", "shape": [1]}],
    "regalloc_priority": [{"name": "li_size", "dtype": "int64", "shape": [1]},
                          {"name": "stage", "dtype": "int64", "shape": [1]},
                          {"name": "weight", "dtype": "float32", "shape": [1]}],
}
_OUTPUT = {"inlining": ("inlining_decision", "int64", 2),
           "inlining_ir2vec": ("inlining_decision", "int64", 2),
           "regalloc_eviction": ("index_to_evict", "int64", 33),
           "regalloc_priority": ("priority", "float32", 1)}


def problem_features(problem: str) -> list[dict]:
  """Feature list of a problem: mlgo.problems' when available, else the built-in one."""
  try:
    from mlgo import problems  # pylint: disable=import-outside-toplevel
    feats = problems.get_problem(problem).features
    out = []
    for f in feats:
      dt = np.dtype(f.dtype).name
      out.append({"name": f.name, "dtype": dt, "shape": [int(d) for d in f.shape]})
    if out:
      return out
  except Exception:  # pylint: disable=broad-except
    pass
  return [dict(f) for f in BUILTIN_FEATURES[problem]]


def make_tiny_policy(problem: str, out_dir, seed: int = 0, hidden: int = 16,
                     features: list[dict] | None = None, saved_model: bool = True):
  """Writes a random-weight policy dir for `problem`; returns its path.

  `features` overrides the feature list (tests use it to build a mismatching policy).
  """
  from mlgo.policy import normalization, policy_io  # pylint: disable=import-outside-toplevel
  feats = features if features is not None else problem_features(problem)
  rng = np.random.default_rng(seed)
  norms = []
  for f in feats:
    if f["dtype"].startswith("int"):
      # Mostly small magnitudes around 0, like most compiler counts and costs.
      vals = np.round(rng.standard_normal(2000) * rng.choice([1.0, 10.0, 100.0], 2000))
    elif f["name"].endswith("_embedding"):
      # Embedding-like vectors (IR2Vec instruction mixes): counts from tens to thousands.
      vals = rng.gamma(1.0, 100.0, 2000)
    else:
      vals = rng.random(2000)
    norms.append(normalization.fit_feature(f["name"], vals, max_boundaries=16).to_json())
  d_in = sum(int(np.prod(f["shape"])) for f in feats) * normalization.ENCODED_PER_SCALAR
  out_name, out_dtype, n_out = _OUTPUT[problem]
  w = {"hidden_0/kernel": rng.normal(0, 1 / np.sqrt(d_in), (d_in, hidden)),
       "hidden_0/bias": rng.normal(0, 0.1, hidden),
       "out/kernel": rng.normal(0, 1, (hidden, n_out)),
       "out/bias": np.zeros(n_out)}
  # Center the outputs on a mid-range input so decisions vary (random weights alone
  # tend to give one answer everywhere, which would test little).
  mid = np.tile([0.5, np.sqrt(0.5), 0.0], d_in // 3)
  h_mid = np.maximum(mid @ w["hidden_0/kernel"] + w["hidden_0/bias"], 0)
  w["out/bias"] = -(h_mid @ w["out/kernel"])
  arch = {"type": "mlp_categorical", "hidden": [hidden], "num_actions": n_out,
          "output_name": out_name, "output_dtype": out_dtype}
  if problem == "regalloc_priority":
    arch["type"] = "mlp_normal"
    w["std/bias"] = np.zeros(1)
  w = {k: np.asarray(v, np.float32) for k, v in w.items()}
  spec = {"problem": problem, "features": feats, "normalization": norms, "architecture": arch}
  return pathlib.Path(policy_io.write_policy_dir(out_dir, spec, w, saved_model=saved_model))
