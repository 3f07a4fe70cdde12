"""The eviction network's cost mask: a column may be chosen only if its heaviest
interfering live range is lighter than the live range being allocated (the default
heuristic's condition), unless it is urgent or the hint, and never when the compiler
requires an eviction; the same in numpy, in the TF graph and in the SavedModel."""
import json
import pathlib

import numpy as np

from mlgo.policy import normalization, policy_io, regalloc_architectures

ROOT = pathlib.Path(__file__).resolve().parents[3]
COLS = regalloc_architectures.COLUMNS


def _spec():
  """The shipped eviction policy's inputs, with a finite use_def_density normalization
  (as a trace fitted since the NaN fix gives) and the cost mask on."""
  spec = json.loads((ROOT / "models" / "regalloc_eviction" / "policy.json").read_text())
  rng = np.random.default_rng(0)
  dens = normalization.fit_feature("use_def_density", rng.gamma(1.0, 0.3, size=4000))
  spec["normalization"] = [dens.to_json() if d["name"] == "use_def_density" else d
                           for d in spec["normalization"]]
  norms = {d["name"]: normalization.FeatureNorm.from_json(d) for d in spec["normalization"]}
  names = [f["name"] for f in spec["features"]]
  spec["architecture"] = regalloc_architectures.eviction_architecture(names, norms, (16, 8),
                                                             cost_mask=True)
  return spec


def _obs(spec, density, mask, urgent=(), hint=()):
  o = {f["name"]: np.zeros(f["shape"], np.int64 if f["dtype"] == "int64" else np.float32)
       for f in spec["features"]}
  for c, d in density.items():
    o["use_def_density"][0, c] = d
  for c in mask:
    o["mask"][0, c] = 1
  for c in urgent:
    o["nr_urgent"][0, c] = 1.0
  for c in hint:
    o["is_hint"][0, c] = 1
  o["progress"] = np.array([0.5], np.float32)
  return o


def _allowed(pol, o):
  enc = pol.normalizer.encode_one(pol.raw_vector(o))[None, :]
  return set(np.flatnonzero(regalloc_architectures.mask_np(enc, pol.arch.config)[0]).tolist()), enc


def test_cost_mask_keeps_what_the_default_could_evict():
  import tensorflow as tf
  spec = _spec()
  w = regalloc_architectures.init_eviction_weights(spec["architecture"], seed=1)
  pol = policy_io.Policy(spec, w)
  density = {0: 0.2, 1: 0.9, 2: 0.5, 3: 0.9, 4: 0.9, 5: float("nan"), 32: 0.5}
  cases = [
      # heavier (1), as heavy (2) and NaN (5) go; urgent (3) and hint (4) stay
      (dict(mask=[0, 1, 2, 3, 4, 5, 32], urgent=[3], hint=[4]), {0, 3, 4, 32}),
      # the compiler must evict (the candidate's own column masked): its mask only
      (dict(mask=[0, 1, 2, 3, 4, 5]), {0, 1, 2, 3, 4, 5}),
      # a column the compiler masked stays masked however light
      (dict(mask=[1, 32]), {32}),
  ]
  for kw, want in cases:
    o = _obs(spec, density, **kw)
    got, enc = _allowed(pol, o)
    assert got == want, (kw, got)
    tf_mask = regalloc_architectures.mask_tf(tf, tf.constant(enc), pol.arch.config).numpy()[0]
    assert set(np.flatnonzero(tf_mask).tolist()) == want
  # Without the option, the compiler's mask alone (the shipped policies' behaviour).
  plain = dict(spec, architecture={k: v for k, v in spec["architecture"].items()
                                   if k != "cost_mask"})
  got, _ = _allowed(policy_io.Policy(plain, w), _obs(spec, density, mask=[0, 1, 2, 32]))
  assert got == {0, 1, 2, 32}


def test_policy_and_saved_model_choose_only_allowed_columns(tmp_path):
  import tensorflow as tf
  spec = _spec()
  w = regalloc_architectures.init_eviction_weights(spec["architecture"], seed=2)
  w["out/kernel"] = w["out/kernel"] * 300.0
  d = policy_io.write_policy_dir(tmp_path / "pol", spec, w)
  pol = policy_io.load_policy(d)
  fn = tf.saved_model.load(str(d / "saved_policy")).signatures["action"]
  rng = np.random.default_rng(3)
  masked_out = 0
  for _ in range(80):
    mask = [c for c in range(32) if rng.random() < 0.5] + [32]
    density = {c: float(rng.gamma(1.0, 0.3)) for c in range(COLS)}
    o = _obs(spec, density, mask=mask)
    for f in spec["features"]:   # the other features random, as llc sends them
      if f["name"] not in ("mask", "use_def_density", "nr_urgent", "is_hint", "progress"):
        o[f["name"]] = (rng.random(f["shape"]) * 3).astype(o[f["name"]].dtype)
    allowed, _ = _allowed(pol, o)
    masked_out += len(set(mask) - allowed)
    a = int(pol.act(o))
    assert a in allowed
    assert int(fn(**{k: tf.constant(v) for k, v in o.items()})["index_to_evict"][0]) == a
  assert masked_out > 0


def test_problem_takes_the_option_and_names_what_it_refuses():
  import pytest  # pylint: disable=import-outside-toplevel
  from mlgo.problems import get_problem  # pylint: disable=import-outside-toplevel
  spec = _spec()
  norms = {d["name"]: normalization.FeatureNorm.from_json(d) for d in spec["normalization"]}
  problem = get_problem("regalloc_eviction")
  arch = problem.architecture(spec["features"], norms, None, {"cost_mask": True})
  assert arch["cost_mask"] == spec["architecture"]["cost_mask"]
  assert arch["hidden"] == list(problem.default_hidden)
  assert "cost_mask" not in problem.architecture(spec["features"], norms)
  with pytest.raises(ValueError, match=r"regalloc_eviction: architecture options \['nope'\]"):
    problem.architecture(spec["features"], norms, None, {"nope": 1})
