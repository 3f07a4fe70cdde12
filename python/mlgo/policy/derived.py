"""Policies made from other policies: weight averages, ensembles (members side by side
in one wider network, each reading its own encoding where their normalizations differ),
copies that defer to the compiler where unsure, and a narrow policy widened to more
inputs. Each writes an ordinary policy dir that every consumer reads unchanged.
"""
import json
import pathlib

import numpy as np

from mlgo.policy.policy_io import (Policy, deferral_bounds, load_policy,
                                   member_normalizations, scalar_positions,
                                   write_policy_dir)
from mlgo.policy.regalloc_architectures import NORMALIZED_THRESHOLDS

# Spec keys that record how one policy dir was made, not what the policy is.
MEMBER_PROVENANCE = ("averaged_from", "averaged_weights", "fine_tuned_from", "probe_dirs",
                     "widened_from", "ensemble_of")


def _check_same_inputs(dirs, pols, keys, why: str = ""):
  ref = pols[0]
  for d, p in zip(dirs[1:], pols[1:]):
    for key in keys:
      if json.dumps(p.spec.get(key), sort_keys=True) != json.dumps(ref.spec.get(key),
                                                                   sort_keys=True):
        raise ValueError(f"{d}: its {key} differs from {dirs[0]}'s{why}")


def average_policies(policy_dirs, output, saved_model: bool = True,
                     weights=None) -> Policy:
  """Weight average of policies that share a spec (architecture, features and
  normalization), e.g. the last N iterations of one PPO run: averaging along the
  trajectory smooths the iteration-to-iteration noise of a single snapshot.
  `weights` (one non-negative number a policy, normalized to sum 1; default equal)
  makes it a step part of the way from one policy towards another."""
  dirs = [pathlib.Path(d) for d in policy_dirs]
  if not dirs:
    raise ValueError("average_policies: no policy dirs given")
  if weights is None:
    weights = [1.0] * len(dirs)
  share = np.asarray(weights, dtype=np.float64)
  if share.shape != (len(dirs),) or not np.all(np.isfinite(share)) or np.any(share < 0) \
      or share.sum() <= 0:
    raise ValueError(f"average_policies: weights {list(weights)} must be one finite number "
                     f">= 0 for each of the {len(dirs)} policies, not all 0")
  share = share / share.sum()
  pols = [load_policy(d) for d in dirs]
  ref = pols[0]
  # The same deferral too: the average takes the first member's, which would silently
  # stand for members that defer otherwise (or not at all).
  _check_same_inputs(dirs, pols, ("problem", "features", "normalization",
                                  "ensemble_normalization", "encoding", "architecture",
                                  "defer"),
                     "; only policies of one run (same spec) can be averaged")
  averaged = {k: np.tensordot(share, np.stack([p.arch.w[k] for p in pols]), axes=1
                             ).astype(ref.arch.w[k].dtype)
              for k in ref.arch.w}
  # How each member was made (fine-tuning source, probe dirs, an earlier average) is
  # each member's own history: copied from the first member it would misdescribe the
  # average, whose history is its members.
  spec = {k: v for k, v in ref.spec.items() if k not in MEMBER_PROVENANCE}
  spec["averaged_from"] = [str(d) for d in dirs]
  if len(set(share.tolist())) > 1:
    spec["averaged_weights"] = [round(float(x), 6) for x in share]
  write_policy_dir(output, spec, averaged, saved_model=saved_model)
  return load_policy(output)


def ensemble_policies(policy_dirs, output, saved_model: bool = True) -> Policy:
  """One policy whose output is the mean of the members' outputs (logits, or the mean of
  a Normal), written as a single wider MLP of the same architecture: the members' hidden
  layers side by side (block-diagonal from the second layer on) and their output layers
  stacked and divided by their number. Unlike a weight average, this needs no shared
  training trajectory; the members need the same problem, features, encoding and
  architecture (all but the layer widths, which add up).

  Members that fitted different normalizations (e.g. seeds of one command, each with its
  own trace sample) keep them: the input is encoded once per member with its own norms
  (spec "ensemble_normalization", Normalizer.copies), and the first layer is
  block-diagonal too, each member reading only its own encoding. Every consumer of a
  policy dir (numpy evaluator, SavedModel, AOT, the release compiler) reads the result
  unchanged."""
  dirs = [pathlib.Path(d) for d in policy_dirs]
  if not dirs:
    raise ValueError("ensemble_policies: no policy dirs given")
  pols = [load_policy(d) for d in dirs]
  _check_same_inputs(dirs, pols, ("problem", "features", "encoding", "defer"))
  archs = [dict(p.spec["architecture"]) for p in pols]
  encoders = [member_normalizations(p.spec) for p in pols]
  shared = all(json.dumps(e, sort_keys=True) == json.dumps(encoders[0], sort_keys=True)
               for e in encoders)
  if not shared and archs[0]["type"] not in _OWN_ENCODER_TYPES:
    raise ValueError(f"{dirs[0]}: members of type {archs[0]['type']} must share one "
                     "normalization to be ensembled (only "
                     f"{', '.join(_OWN_ENCODER_TYPES)} read per-member encodings)")
  rest = [_architecture_beyond_widths(a, normalized=not shared) for a in archs]
  for d, a, r in zip(dirs, archs, rest):
    if r != rest[0] or len(a.get("hidden", ())) != len(archs[0].get("hidden", ())):
      raise ValueError(f"{d}: its architecture differs from {dirs[0]}'s beyond the layer "
                       "widths")
  n_hidden = len(archs[0]["hidden"])
  if n_hidden == 0:
    raise ValueError(f"{dirs[0]}: a policy without hidden layers cannot be ensembled")
  ws = [p.arch.w for p in pols]
  known = {f"hidden_{i}/{t}" for i in range(n_hidden) for t in ("kernel", "bias")}
  known |= {"out/kernel", "out/bias", "std/bias", "prior/scale"}
  for d, w in zip(dirs, ws):
    extra = sorted(set(w) - known)
    if extra:
      raise ValueError(f"{d}: weights {extra} have no ensemble rule")
  k = float(len(ws))
  if shared:
    out = {"hidden_0/kernel": np.concatenate([w["hidden_0/kernel"] for w in ws], axis=1)}
  else:
    out = {"hidden_0/kernel": _block_diagonal([w["hidden_0/kernel"] for w in ws])}
  for i in range(1, n_hidden):
    out[f"hidden_{i}/kernel"] = _block_diagonal([w[f"hidden_{i}/kernel"] for w in ws])
  for i in range(n_hidden):
    out[f"hidden_{i}/bias"] = np.concatenate([w[f"hidden_{i}/bias"] for w in ws])
  out["out/kernel"] = np.concatenate([w["out/kernel"] for w in ws], axis=0) / k
  out["out/bias"] = np.mean([w["out/bias"] for w in ws], axis=0)
  if "prior/scale" in ws[0]:
    # The eviction default prior: every member adds its scale times the same one-hot
    # (same inputs, same rule), so the mean of the logits has the mean scale.
    out["prior/scale"] = np.mean([w["prior/scale"] for w in ws], axis=0)
  if "std/bias" in ws[0]:
    # Only sampling reads it (greedy decisions use the mean); the members' average.
    out["std/bias"] = np.mean([w["std/bias"] for w in ws], axis=0)
  out = {name: v.astype(np.float32) for name, v in out.items()}
  spec = {key: v for key, v in pols[0].spec.items()
          if key not in MEMBER_PROVENANCE and key != "ensemble_normalization"}
  spec["architecture"] = dict(archs[0], hidden=[int(sum(a["hidden"][i] for a in archs))
                                                for i in range(n_hidden)])
  if not shared:
    spec["ensemble_normalization"] = [norm for e in encoders for norm in e]
    if archs[0]["type"] in _COLUMN_TYPES:
      spec["architecture"]["input_copies"] = len(spec["ensemble_normalization"])
  elif len(encoders[0]) > 1:
    spec["ensemble_normalization"] = encoders[0]
  spec["ensemble_of"] = [str(d) for d in dirs]
  write_policy_dir(output, spec, out, saved_model=saved_model)
  return load_policy(output)


# Architectures whose first layer can read one member's own encoding of the input: flat
# MLPs read a block of a wider input; the eviction column scorer gives each column every
# member's column inputs side by side (architecture "input_copies").
_COLUMN_TYPES = ("regalloc_column_scorer",)
_OWN_ENCODER_TYPES = ("mlp_categorical", "mlp_normal") + _COLUMN_TYPES


def _architecture_beyond_widths(arch: dict, normalized: bool) -> str:
  """What must agree between ensemble members: the architecture without its widths and
  input copies, and (members with their own normalizations) without the thresholds
  written in each member's normalized units."""
  def strip(v):
    if isinstance(v, dict):
      return {k: strip(x) for k, x in v.items()
              if not (normalized and k in NORMALIZED_THRESHOLDS)}
    return v
  return json.dumps(strip({k: v for k, v in arch.items() if k not in ("hidden", "input_copies")}),
                    sort_keys=True)


def _block_diagonal(blocks) -> np.ndarray:
  big = np.zeros((sum(b.shape[0] for b in blocks), sum(b.shape[1] for b in blocks)),
                 np.float32)
  r = c = 0
  for b in blocks:
    big[r:r + b.shape[0], c:c + b.shape[1]] = b
    r, c = r + b.shape[0], c + b.shape[1]
  return big


def parse_below_item(item: str) -> tuple[str, float]:
  """"edge_count=32" -> ("edge_count", 32.0): one --below deferral, FEATURE=NUMBER."""
  name, eq, value = str(item).partition("=")
  try:
    number = float(value)
  except ValueError:
    eq = ""
  if not eq or not name:
    raise ValueError(f"below={item}: expected FEATURE=NUMBER, e.g. edge_count=32")
  return name, number


def parse_deferral(text: str) -> dict:
  """A deferral written as defer_policy's flags, comma-separated ("margin=0.4,outside=2,
  nonzero=last_call_to_static_bonus,below=edge_count=32") -> with_deferral's keyword
  arguments ({"margin", "outside", "nonzero", "below"}); "" is no deferral."""
  out = {"margin": 0.0, "outside": 0.0, "nonzero": [], "below": {}}
  for item in filter(None, (x.strip() for x in str(text).split(","))):
    key, eq, value = item.partition("=")
    if not eq or key not in out:
      raise ValueError(f"deferral {text!r}: {item!r} is not margin=X, outside=F, "
                       f"nonzero=FEATURE or below=FEATURE=NUMBER")
    if key == "nonzero":
      out["nonzero"].append(value)
    elif key == "below":
      name, number = parse_below_item(value)
      out["below"][name] = number
    else:
      try:
        out[key] = float(value)
      except ValueError:
        raise ValueError(f"deferral {text!r}: {key} needs a number, not {value!r}") from None
  return out


def with_deferral(policy_dir, output, margin: float, feature: str = "inlining_default",
                  saved_model: bool = True, outside: float = 0.0,
                  nonzero=(), below=None) -> Policy:
  """A copy of a categorical policy that takes the compiler's own decision (`feature`
  of the observation) wherever its top two probabilities are closer than `margin`,
  (outside > 0) wherever an input lies beyond its training range by more than that factor
  (deferral_bounds), wherever one of the `nonzero` scalar inputs is not 0, and wherever
  one of the `below` scalar inputs ({name: threshold}) is under its threshold. With none
  of these, the copy has no deferral. The SavedModel takes `feature` as one more
  input."""
  p = load_policy(policy_dir)
  if "logits" not in p.arch.DIST_PARAMS or not hasattr(p.arch, "tf_logits"):
    raise ValueError(f"{policy_dir}: deferring to the default needs a categorical policy")
  if margin < 0:
    raise ValueError(f"margin must be >= 0, not {margin}")
  if outside:
    deferral_bounds(p.normalizer, outside)   # refuses a factor below 1
  nonzero = list(dict.fromkeys(nonzero))
  scalar_positions(p, nonzero, "nonzero")    # refuses a name that is not a scalar input
  below = {str(k): float(v) for k, v in (below or {}).items()}
  scalar_positions(p, list(below), "below")
  for k, v in below.items():
    if not np.isfinite(v):
      raise ValueError(f"defer on below {k!r}: the threshold must be a finite number, not {v}")
  spec = {k: v for k, v in p.spec.items() if k != "defer"}
  if margin > 0 or outside > 0 or nonzero or below:
    spec["defer"] = {"margin": float(margin), "feature": feature}
    if outside > 0:
      spec["defer"]["outside"] = float(outside)
    if nonzero:
      spec["defer"]["nonzero"] = nonzero
    if below:
      spec["defer"]["below"] = below
  write_policy_dir(output, spec, p.arch.w, saved_model=saved_model)
  return load_policy(output)


def widen_policy(policy_dir, like_dir, output, saved_model: bool = True) -> Policy:
  """The policy of `policy_dir`, given the features (and their normalization) of the
  wider policy `like_dir` (e.g. a clone for "inlining_ir2vec"): the first layer's
  weights for inputs the original lacks are zero, so the result decides exactly as the
  original does and fine-tuning starts from it instead of from an imperfect clone.
  Needs `like_dir`'s features to start with the original's, in order."""
  src, like = load_policy(policy_dir), load_policy(like_dir)
  for d, p in ((policy_dir, src), (like_dir, like)):
    if p.normalizer.copies > 1:
      raise ValueError(f"{d}: an ensemble of differently normalized members cannot be "
                       "widened")
  if src.spec["architecture"]["type"] != "mlp_categorical":
    raise ValueError(f"{policy_dir}: only mlp_categorical policies can be widened")
  if like.spec["architecture"] != src.spec["architecture"]:
    raise ValueError(f"{like_dir}: its architecture differs from {policy_dir}'s")
  n = len(src.features)
  if like.features[:n] != src.features:
    raise ValueError(f"{like_dir}: its features do not start with {policy_dir}'s")
  norms = {d["name"]: d for d in like.spec["normalization"]}
  for d in src.spec["normalization"]:
    norms[d["name"]] = d          # the original's own features keep its normalization
  enc_src = src.normalizer.encode_one(np.zeros(sum(src.sizes))).shape[0]
  enc_like = like.normalizer.encode_one(np.zeros(sum(like.sizes))).shape[0]
  weights = dict(src.arch.w)
  k = weights["hidden_0/kernel"]
  weights["hidden_0/kernel"] = np.concatenate(
      [k, np.zeros((enc_like - enc_src, k.shape[1]), k.dtype)], axis=0)
  spec = dict(src.spec)
  spec["problem"] = like.problem
  spec["features"] = like.features
  spec["normalization"] = [norms[f["name"]] for f in like.features]
  spec["widened_from"] = str(policy_dir)
  write_policy_dir(output, spec, weights, saved_model=saved_model)
  return load_policy(output)
