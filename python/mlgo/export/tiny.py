"""Small deterministic policies in the training format (policy.json, weights.npz,
saved_policy/), used to test and benchmark the release path before, or independently
of, a trained policy. Written with mlgo.policy's own saver so the format is the real one.
"""
import pathlib

import numpy as np

# A flat MLP per problem (not the trained architectures): output name, dtype, width.
_OUTPUT = {"inlining": ("inlining_decision", "int64", 2),
           "inlining_ir2vec": ("inlining_decision", "int64", 2),
           "inlining_ctx": ("inlining_decision", "int64", 2),
           "inlining_ir2vec_ctx": ("inlining_decision", "int64", 2),
           "regalloc_eviction": ("index_to_evict", "int64", 33),
           "regalloc_priority": ("priority", "float32", 1)}


def problem_features(problem: str) -> list[dict]:
  """The policy-visible features of a problem (mlgo.problems), as policy.json lists them."""
  from mlgo import problems  # pylint: disable=import-outside-toplevel
  return [{"name": f.name, "dtype": np.dtype(f.dtype).name, "shape": [int(d) for d in f.shape]}
          for f in problems.get_problem(problem).features]


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
