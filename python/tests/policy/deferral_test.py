"""The shipped deferring inliner on real clang-22 decisions: where the base model's two
probabilities are within the margin it answers clang's own decision, elsewhere exactly
what the base model answers."""
import json
import pathlib

import numpy as np
import pytest

from mlgo import env
from mlgo.env.modules import module_from_source
from mlgo.policy import derived, policy_io
from mlgo.problems import get_problem
from mlgo.training import testing

ROOT = pathlib.Path(__file__).resolve().parents[3]
PROGRAMS = sorted((ROOT / "python" / "tests" / "training" / "programs").glob("*.c*"))


class _Both:
  """Answers with the deferring policy; records what both policies said."""

  def __init__(self, base, deferring):
    self.base, self.deferring, self.rows = base, deferring, []

  def act(self, obs):
    enc = self.base.normalizer.encode_one(self.base.raw_vector(obs))[None, :]
    lg = self.base.arch.dist_params(enc)["logits"][0].astype(np.float64)
    p = np.exp(lg - lg.max())
    p /= p.sum()
    d = int(self.deferring.act(obs))
    self.rows.append((abs(p[1] - p[0]), int(self.base.act(obs)),
                      int(np.asarray(obs["inlining_default"]).reshape(-1)[0]), d))
    return d


def _compile_programs(recorder_cls, base, deferring, problem, tmp_path, programs=PROGRAMS):
  """Compiles every test program with `deferring` answering (recorder_cls records both
  policies' answers); returns the recorded rows of all decisions."""
  rows = []
  for src in programs:
    pol = recorder_cls(base, deferring)
    r = env.compile_module(module_from_source(str(src), str(tmp_path), opt="Oz"), problem, pol)
    assert r.ok, r.reason
    rows += pol.rows
  return rows


def test_defers_exactly_where_unsure(tmp_path):
  base = policy_io.load_policy(ROOT / "models" / "inlining_oz_ir2vec")
  deferring = policy_io.load_policy(ROOT / "models" / "inlining_oz_ir2vec_defer")
  margin = deferring.spec["defer"]["margin"]
  assert margin == 0.4 and deferring.spec["defer"]["feature"] == "inlining_default"
  rows = _compile_programs(_Both, base, deferring, get_problem(base.problem), tmp_path)
  assert len(rows) > 20
  for gap, b, default, d in rows:
    assert d == (default if gap < margin else b)
  assert any(g < margin for g, *_ in rows) and any(g >= margin for g, *_ in rows)


class _RawRecorder:
  """Answers with a deferring policy; records the raw inputs, what the base policy said,
  clang's default and the answer given."""

  def __init__(self, base, deferring):
    self.base, self.deferring, self.rows = base, deferring, []

  def act(self, obs):
    d = int(self.deferring.act(obs))
    self.rows.append((self.base.raw_vector(obs), int(self.base.act(obs)),
                      int(np.asarray(obs["inlining_default"]).reshape(-1)[0]), d))
    return d


def test_defers_exactly_outside_the_training_range(tmp_path):
  base = policy_io.load_policy(ROOT / "models" / "inlining_oz_ir2vec")
  deferring = derived.with_deferral(ROOT / "models" / "inlining_oz_ir2vec",
                                      tmp_path / "pol", margin=0.0, outside=1.5,
                                      saved_model=False)
  assert deferring.spec["defer"] == {"margin": 0.0, "feature": "inlining_default",
                                     "outside": 1.5}
  lo, hi = policy_io.deferral_bounds(base.normalizer, 1.5)
  rows = _compile_programs(_RawRecorder, base, deferring, get_problem(base.problem), tmp_path)
  outside = [bool(np.any((raw > hi) | (raw < lo))) for raw, *_ in rows]
  # These small programs have call graphs smaller than any training module's, so some of
  # their decisions fall outside (and the others inside) the range.
  assert 0 < sum(outside) < len(rows)
  for out, (raw, b, default, d) in zip(outside, rows):
    assert d == (default if out else b)
  assert deferring.deferred == sum(outside)


def test_defers_exactly_where_a_named_input_is_nonzero(tmp_path):
  """--nonzero=last_call_to_static_bonus: the sole call of a static function is left to
  clang, every other decision is the base policy's."""
  base = policy_io.load_policy(ROOT / "models" / "inlining_oz_ir2vec")
  deferring = derived.with_deferral(ROOT / "models" / "inlining_oz_ir2vec",
                                      tmp_path / "pol", margin=0.0,
                                      nonzero=["last_call_to_static_bonus"] * 2,
                                      saved_model=False)
  assert deferring.spec["defer"] == {"margin": 0.0, "feature": "inlining_default",
                                     "nonzero": ["last_call_to_static_bonus"]}
  at = base.input_names.index("last_call_to_static_bonus")
  rows = _compile_programs(_RawRecorder, base, deferring, get_problem(base.problem), tmp_path)
  static = [raw[at] != 0 for raw, *_ in rows]
  assert 0 < sum(static) < len(rows)
  for st, (raw, b, default, d) in zip(static, rows):
    assert d == (default if st else b)
  assert deferring.deferred == sum(static)


def test_defers_exactly_where_a_named_input_is_below_its_threshold(tmp_path):
  """--below=edge_count=E: decisions in a module with fewer than E calls to defined
  functions are clang's, every other decision is the base policy's. E is the median
  edge_count these programs show, so both kinds occur."""
  src = ROOT / "models" / "inlining_oz_ir2vec"
  base = policy_io.load_policy(src)
  problem = get_problem(base.problem)
  at = base.input_names.index("edge_count")
  seen = [raw[at] for raw, *_ in _compile_programs(_RawRecorder, base, base, problem,
                                                    tmp_path)]
  threshold = float(np.median(seen))
  deferring = derived.with_deferral(src, tmp_path / "pol", margin=0.0,
                                    below={"edge_count": threshold}, saved_model=False)
  assert deferring.spec["defer"] == {"margin": 0.0, "feature": "inlining_default",
                                     "below": {"edge_count": threshold}}
  rows = _compile_programs(_RawRecorder, base, deferring, problem, tmp_path)
  small = [raw[at] < threshold for raw, *_ in rows]
  assert 0 < sum(small) < len(rows)
  for sm, (raw, b, default, d) in zip(small, rows):
    assert d == (default if sm else b)
  assert deferring.deferred == sum(small)
  # The rule travels with the policy dir and joins the other rules.
  both = derived.with_deferral(tmp_path / "pol", tmp_path / "both", margin=0.0,
                               nonzero=["last_call_to_static_bonus"],
                               below={"edge_count": threshold}, saved_model=False)
  assert set(both.spec["defer"]) == {"margin", "feature", "nonzero", "below"}


def test_below_deferral_refuses_bad_names_and_thresholds(tmp_path):
  src = ROOT / "models" / "inlining_oz_ir2vec"
  with pytest.raises(ValueError, match="below 'no_such_feature': not an input of this policy"):
    derived.with_deferral(src, tmp_path / "a", 0.0, below={"no_such_feature": 3},
                          saved_model=False)
  with pytest.raises(ValueError, match="below 'callee_embedding': not a scalar input"):
    derived.with_deferral(src, tmp_path / "b", 0.0, below={"callee_embedding": 3},
                          saved_model=False)
  with pytest.raises(ValueError, match="below 'edge_count': the threshold must be a finite"):
    derived.with_deferral(src, tmp_path / "c", 0.0, below={"edge_count": float("nan")},
                          saved_model=False)
  assert not any((tmp_path / x).exists() for x in "abc")


def test_defer_policy_cli_parses_below(tmp_path, capsys):
  tool = testing.tool_module("defer_policy")
  src = str(ROOT / "models" / "inlining_oz_ir2vec")
  assert tool.main([f"--policy={src}", "--below=edge_count=64", "--margin=0.4",
                    f"--output={tmp_path / 'ok'}"]) == 0
  assert "below edge_count < 64" in capsys.readouterr().out
  assert policy_io.load_policy(tmp_path / "ok").spec["defer"]["below"] == {"edge_count": 64.0}
  for bad in ("edge_count", "edge_count=", "=64", "edge_count=many"):
    with pytest.raises(SystemExit):
      tool.main([f"--policy={src}", f"--below={bad}", f"--output={tmp_path / 'bad'}"])
    assert "expected FEATURE=NUMBER" in capsys.readouterr().err
  assert tool.main([f"--policy={src}", "--below=callee_embedding=1",
                    f"--output={tmp_path / 'bad'}"]) == 1
  assert "not a scalar input" in capsys.readouterr().err
  assert not (tmp_path / "bad").exists()


def test_nonzero_deferral_refuses_names_that_are_not_scalar_inputs(tmp_path):
  src = ROOT / "models" / "inlining_oz_ir2vec"
  with pytest.raises(ValueError, match="'no_such_feature': not an input of this policy"):
    derived.with_deferral(src, tmp_path / "a", 0.0, nonzero=["no_such_feature"],
                            saved_model=False)
  with pytest.raises(ValueError, match="'callee_embedding': not a scalar input"):
    derived.with_deferral(src, tmp_path / "b", 0.0, nonzero=["callee_embedding"],
                            saved_model=False)
  assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_deferral_bounds_widen_each_end_by_the_factor():
  from mlgo.policy.normalization import FeatureNorm, Normalizer
  norms = [FeatureNorm("a", np.array([0.0, 3.0, 9.0]), 1.0, 1.0),
           FeatureNorm("b", np.array([-4.0, 2.0]), 0.0, 1.0)]
  lo, hi = policy_io.deferral_bounds(Normalizer(norms), 2.0)
  # 1 + |x| may double beyond each end: [0, 9] -> [-1, 19]; [-4, 2] -> [-9, 5].
  assert lo.tolist() == [-1.0, -9.0] and hi.tolist() == [19.0, 5.0]
  lo1, hi1 = policy_io.deferral_bounds(Normalizer(norms), 1.0)
  assert lo1.tolist() == [0.0, -4.0] and hi1.tolist() == [9.0, 2.0]
  with pytest.raises(ValueError, match="outside factor must be >= 1"):
    policy_io.deferral_bounds(Normalizer(norms), 0.5)


def test_nan_is_not_outside_and_both_zero_removes_the_deferral(tmp_path):
  src = ROOT / "models" / "inlining_oz_ir2vec"
  pol = derived.with_deferral(src, tmp_path / "o", margin=0.0, outside=1.0,
                                saved_model=False)
  base = policy_io.load_policy(src)
  obs = {n: np.zeros(s, np.float32 if s > 1 else np.int64)
         for n, s in zip(base.input_names, base.sizes)}
  lo, hi = policy_io.deferral_bounds(base.normalizer, 1.0)
  # Every input at the low end of its range: inside.
  i = 0
  for n, s in zip(base.input_names, base.sizes):
    obs[n] = lo[i:i + s].astype(obs[n].dtype)
    i += s
  base_says = int(base.act(obs))
  obs["inlining_default"] = np.array([1 - base_says], np.int64)
  assert int(pol.act(obs)) == base_says and pol.deferred == 0
  emb = next(n for n, s in zip(base.input_names, base.sizes) if s > 1)
  nan = dict(obs, **{emb: np.full_like(obs[emb], np.nan)})
  pol.act(nan)
  assert pol.deferred == 0
  far = dict(obs, callee_users=np.array([int(hi[base.input_names.index("callee_users")]) + 1],
                                        np.int64))
  assert int(pol.act(far)) == 1 - base_says and pol.deferred == 1
  assert "defer" not in derived.with_deferral(tmp_path / "o", tmp_path / "none", 0.0,
                                                saved_model=False).spec
  with pytest.raises(ValueError, match="margin must be >= 0"):
    derived.with_deferral(src, tmp_path / "bad", -0.1, saved_model=False)


def test_evaluate_counts_the_deferred_decisions(tmp_path):
  import csv  # pylint: disable=import-outside-toplevel
  import io  # pylint: disable=import-outside-toplevel
  from mlgo.evaluation import evaluate  # pylint: disable=import-outside-toplevel
  from mlgo.training import testing  # pylint: disable=import-outside-toplevel
  corpus = testing.make_tiny_corpus(tmp_path / "corpus", PROGRAMS,
                                    heldout=[p.stem for p in PROGRAMS])
  derived.with_deferral(ROOT / "models" / "inlining_oz_ir2vec", tmp_path / "pol",
                          margin=0.0, outside=1.5, saved_model=False)
  out = io.StringIO()
  s = evaluate("inlining", corpus, tmp_path / "pol", tmp_path / "ev", stream=out,
               use_cache=False)
  rows = list(csv.DictReader(open(tmp_path / "ev" / "per_key.csv")))
  assert len(rows) == len(PROGRAMS)
  assert s["deferred"] == sum(int(r["policy_deferred"]) for r in rows)
  assert 0 < s["deferred"] < s["decisions"]
  # The policy has one rule, so every deferred decision is that rule's.
  assert s["deferred_by"] == {"outside": s["deferred"]}
  assert f"{s['deferred']} deferred to the compiler ({s['deferred']} by outside)" in out.getvalue()
  plain = evaluate("inlining", corpus, ROOT / "models" / "inlining_oz_ir2vec",
                   tmp_path / "ev0", stream=io.StringIO(), use_cache=False)
  assert plain["deferred"] == 0
  # Guarded: the plain report made from the same compiles counts the same decisions; the
  # guarded one counts them in the modules whose policy object it kept.
  g = evaluate("inlining", corpus, tmp_path / "pol", tmp_path / "evg", stream=io.StringIO(),
               use_cache=False, guarded=True, plain_output=tmp_path / "evg-plain")
  gp = json.loads((tmp_path / "evg-plain" / "summary.json").read_text())
  assert gp["deferred"] == s["deferred"] and gp["deferred_by"] == s["deferred_by"]
  grows = list(csv.DictReader(open(tmp_path / "evg" / "per_key.csv")))
  assert 0 < g["deferred"] == sum(int(r["policy_deferred"]) for r in grows) <= s["deferred"]
  assert g["deferred_by"] == {"outside": g["deferred"]}


def test_the_shipped_context_model_defers_by_its_four_rules(tmp_path):
  """models/inlining_oz_ctx on real clang-22 compiles through the context plugin: each
  decision is clang's where the module has fewer than 32 calls left, at the sole call of
  a static function, where an input is beyond twice the training range or where the two
  probabilities are within 0.4; else its network's (one network, trained on the
  default and @wide packages). The four small programs have fewer than 32 calls throughout;
  catch_rethrow.cpp has more than 32 throughout, so both sides of the gate are seen, and
  many_calls.c has the sole call of a static function above the gate, so a rule beyond
  the gate defers whatever the network says."""
  shipped = policy_io.load_policy(ROOT / "models" / "inlining_oz_ctx")
  d = shipped.spec["defer"]
  assert d == {"margin": 0.4, "feature": "inlining_default", "outside": 2.0,
               "nonzero": ["last_call_to_static_bonus"], "below": {"edge_count": 32.0}}
  assert shipped.normalizer.copies == 1
  base = policy_io.Policy({k: v for k, v in shipped.spec.items() if k != "defer"},
                          shipped.arch.w)
  lo, hi = policy_io.deferral_bounds(base.normalizer, d["outside"])
  at = base.input_names.index("last_call_to_static_bonus")
  ec = base.input_names.index("edge_count")
  problem = get_problem(shipped.problem)
  assert problem.name == "inlining_ir2vec_ctx"
  rows = _compile_programs(_RawRecorder, base, shipped, problem, tmp_path,
                          PROGRAMS + [ROOT / "testdata" / "programs" / n
                                      for n in ("catch_rethrow.cpp", "many_calls.c")])
  first = {}   # the first rule that held, in the policy's order of checks
  whys = []
  small = 0     # decisions in a module under the gate, whatever rule came first
  sole_above = 0   # sole calls of a static function in a module above the gate
  for raw, b, default, got in rows:
    lg = base.arch.dist_params(base.normalizer.encode_one(raw)[None, :])["logits"][0]
    p = np.exp(lg - lg.max()) / np.exp(lg - lg.max()).sum()
    # Keyed by the policy's rule names, in its order of checks (dicts keep insertion order).
    rules = {"nonzero": raw[at] != 0, "below": raw[ec] < 32,
             "outside": bool(np.any((raw > hi) | (raw < lo))),
             "margin": abs(p[1] - p[0]) < d["margin"]}
    small += bool(rules["below"])
    sole_above += bool(rules["nonzero"] and not rules["below"])
    why = next((k for k, held in rules.items() if held), None)
    whys.append(why)
    if why:
      first[why] = first.get(why, 0) + 1
    assert got == (default if why else b)
  network = len(rows) - sum(first.values())
  assert shipped.deferred == sum(first.values())
  assert shipped.deferred_by == first
  # The gate and the network both decide some calls, and a rule of the network's own
  # (beyond the gate) defers some.
  assert small > 0 and network > 0
  assert shipped.deferred > small
  assert sole_above > 0   # many_calls.c: a rule that needs no network, above the gate
  # The batch form (BC's skip_deferred reads it) names the same rule for every decision.
  raw = np.stack([r[0] for r in rows])
  ends = np.cumsum(base.sizes)
  feats = {n: raw[:, e - k:e] for n, k, e in zip(base.input_names, base.sizes, ends)}
  np.testing.assert_array_equal(shipped.deferred_batch(feats), [w is not None for w in whys])
  lg = base.dist_params_batch(feats)["logits"]
  names = shipped._deferral_rules(raw, lg)  # pylint: disable=protected-access
  assert list(names) == [w or "" for w in whys]
  assert not base.deferred_batch(feats).any()   # a policy without deferrals defers nothing
