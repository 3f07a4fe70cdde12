"""Validation metrics of policy selection on a real tiny corpus: total, module mean,
package mean, per-key geomean and the regression penalty, checked against separate compiles."""
import pathlib

import numpy as np
import pytest

from mlgo import corpus as corpus_lib
from mlgo.env import work
from mlgo.policy import policy_io
from mlgo.problems import get_problem
from mlgo.training import ppo, selection, testing

ROOT = pathlib.Path(__file__).resolve().parents[3]
PROGRAMS = sorted((pathlib.Path(__file__).parent / "programs").glob("*.c*"))


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  d = testing.make_tiny_corpus(tmp_path_factory.mktemp("c"), PROGRAMS, variants=2)
  c = corpus_lib.load_corpus(d)
  problem = get_problem("inlining")
  pol = policy_io.load_policy(ROOT / "models" / "inlining_oz")
  default, policy = {}, {}
  for m in c.modules:
    default.update(problem.scores(m.name, work.compile_one(m, "inlining", "default")[0].reward))
    r = work.compile_one(m, "inlining", (pol.spec, pol.arch.w, True))[0]
    policy.update(problem.scores(m.name, r.reward))
  return c, problem, pol, default, policy


@pytest.mark.parametrize("metric", ["total", "module_mean", "package_mean", "key_geomean"])
@pytest.mark.parametrize("weight", [0.0, 0.5])
def test_metrics(setup, metric, weight):
  c, problem, pol, default, policy = setup
  cfg = ppo.PPOConfig(validation_metric=metric, validation_regression_weight=weight, jobs=2)
  val, cpu = selection.validate(problem, c, c.modules, pol.spec, pol.arch.w, default, cfg)
  assert cpu > 0
  ratio = {m: (policy[m] + 1) / (default[m] + 1) - 1 for m in default}
  if metric == "total":
    want = (sum(policy.values()) / sum(default.values()) - 1) * 100
  elif metric == "module_mean":
    want = np.mean(list(ratio.values())) * 100
  elif metric == "key_geomean":   # inlining's keys are modules
    want = (np.exp(np.mean([np.log(1 + r) for r in ratio.values()])) - 1) * 100
    # The modules' changes differ, so this is not the module mean under another name.
    assert want != pytest.approx(np.mean(list(ratio.values())) * 100, abs=1e-6)
  else:
    pk = {}
    for m in c.modules:
      t = pk.setdefault(m.package, [0, 0])
      t[0] += policy[m.name]
      t[1] += default[m.name]
    want = np.mean([(p / d - 1) * 100 for p, d in pk.values()])
  want += weight * 100 * sum(r > 0.01 for r in ratio.values()) / len(ratio)
  assert val == pytest.approx(want)


def test_unknown_metric_is_an_error(setup):
  c, problem, pol, default, _ = setup
  cfg = ppo.PPOConfig(validation_metric="median", jobs=2)
  with pytest.raises(ValueError, match="validation_metric"):
    selection.validate(problem, c, c.modules[:1], pol.spec, pol.arch.w, default, cfg)


def test_validation_set_is_fixed_and_fills_in_missing_defaults(setup):
  """The validation set is chosen once (also before any default is known, e.g. a warm
  start without a trace) and kept; the first validation compiles the defaults it lacks,
  giving the same figure as with every default known up front."""
  c, problem, pol, default, _ = setup
  cfg = ppo.PPOConfig(validation_modules=3, jobs=2, seed=1)
  state = {}
  first = selection.validation_set(c.modules, state, cfg)
  assert len(first) == 3 and state["validation_set"] == [m.name for m in first]
  # Later knowledge (decision counts, defaults) does not move the set.
  state["decisions"] = {m.name: 0 for m in c.modules}
  assert selection.validation_set(c.modules, state, cfg) == first
  scores = {}
  val, _ = selection.validate(problem, c, first, pol.spec, pol.arch.w, scores, cfg, state)
  assert sorted(state["default_modules"]) == sorted(m.name for m in first)
  assert scores == {k: v for k, v in default.items() if problem.module_of(k) in state["default_modules"]}
  want, _ = selection.validate(problem, c, first, pol.spec, pol.arch.w, default, cfg)
  assert val == pytest.approx(want) and val == val


def test_hold_out_packages_keeps_whole_packages_out_of_training(setup):
  c, *_ = setup
  train = c.split("train") or list(c.modules)
  packages = sorted({m.package for m in train})
  # Off by default: every training module trains, validation samples them.
  assert selection.hold_out_packages(train, ppo.PPOConfig()) == (train, [], [])
  rest, pool, chosen = selection.hold_out_packages(
      train, ppo.PPOConfig(validation_packages=2, seed=3))
  assert len(chosen) == 2 and set(chosen) <= set(packages)
  assert {m.package for m in pool} == set(chosen)
  assert not {m.package for m in rest} & set(chosen)
  assert len(rest) + len(pool) == len(train)
  # The choice is the seed's, so a resumed run validates on the same packages.
  assert selection.hold_out_packages(
      train, ppo.PPOConfig(validation_packages=2, seed=3))[2] == chosen
  named = selection.hold_out_packages(
      train, ppo.PPOConfig(validation_package_names=("tree",)))
  assert named[2] == ["tree"] and {m.package for m in named[1]} == {"tree"}
  with pytest.raises(ValueError, match=r"\['nope'\] are not packages of the training split"):
    selection.hold_out_packages(train, ppo.PPOConfig(validation_package_names=("nope",)))
  with pytest.raises(ValueError, match="leaves no package to train on"):
    selection.hold_out_packages(train, ppo.PPOConfig(validation_packages=len(packages)))


def test_trainer_validates_on_held_out_packages_and_never_samples_them(setup, tmp_path):
  c, _, _, _, _ = setup
  cfg = ppo.PPOConfig(validation_package_names=("matrix",), validation_modules=100, jobs=2)
  t = ppo.Trainer(c.path, tmp_path / "run", warmstart=ROOT / "models" / "inlining_oz",
                  config=cfg)
  assert t.train_modules and all(m.package != "matrix" for m in t.train_modules)
  val = t.validation_set()
  assert val and {m.package for m in val} == {"matrix"}
  assert t.validation_where == "modules of held-out packages"
  plain = ppo.Trainer(c.path, tmp_path / "plain", warmstart=ROOT / "models" / "inlining_oz",
                      config=ppo.PPOConfig(validation_modules=100, jobs=2))
  assert plain.validation_where == "training modules"


def test_hot_check_is_the_largest_module_ratio_of_separate_compiles(setup):
  c, problem, pol, default, policy = setup
  cfg = ppo.PPOConfig(jobs=2, validation_hot_modules=3, validation_hot_limit=1.5)
  state = {"default_scores": dict(default)}
  hot = selection.hot_set(c.modules, state, cfg, problem)
  want = sorted(default, key=lambda n: (-default[n], n))[:3]   # inlining's keys are modules
  assert [m.name for m in hot] == want and state["hot_set"] == want
  # Chosen once: later defaults do not move it.
  state["default_scores"] = {n: 1.0 for n in default}
  assert selection.hot_set(c.modules, state, cfg, problem) == hot
  worst, where, cpu = selection.hot_check(problem, c, hot, pol.spec, pol.arch.w, default, cfg)
  ratio = {n: (policy[n] + 1) / (default[n] + 1) for n in want}
  assert cpu > 0 and where == max(ratio, key=ratio.get)
  assert worst == pytest.approx(ratio[where])


def _keep(state, out, val, it, worst, limit=1.5):
  d = out / f"iter-{it}"
  d.mkdir(parents=True, exist_ok=True)
  (d / "it").write_text(str(it))
  selection.keep_if_best(state, out, val, it, d, worst, limit)
  return int((out / "best_policy" / "it").read_text())


def test_a_validation_that_blows_up_a_hot_module_is_not_kept(tmp_path):
  cfg = ppo.PPOConfig(validation_hot_modules=40, validation_hot_limit=1.5)
  st = {}
  assert selection.needs_hot_check(st, -1.0, cfg)          # nothing kept yet
  assert _keep(st, tmp_path, -1.0, 0, 1.2) == 0
  assert not selection.needs_hot_check(st, -0.5, cfg)      # not the best: no hot compiles
  assert _keep(st, tmp_path, -0.5, 10, None) == 0
  assert selection.needs_hot_check(st, -3.0, cfg)
  assert _keep(st, tmp_path, -3.0, 20, 2.6) == 0           # best mean, but 2.6x a hot module
  assert st["hot_refused"] == [20]
  assert _keep(st, tmp_path, -2.0, 30, 1.4) == 30          # within the limit
  assert st["best_validation"] == {"iteration": 30, "change_pct": -2.0,
                                   "worst_hot_ratio": 1.4, "refused": False}
  assert st["validation_history"] == {"0": -1.0, "10": -0.5, "20": -3.0, "30": -2.0}
  assert st["hot_history"] == {"0": 1.2, "20": 2.6, "30": 1.4}
  # The best few for a merged final policy leave the refused iteration out.
  assert selection.best_iterations(st["validation_history"], 2, st["hot_refused"]) == [30, 0]
  assert selection.best_iterations(st["validation_history"], 2) == [20, 30]
  # Off (no limit): the same figures keep the best mean.
  assert not selection.needs_hot_check({}, -1.0, ppo.PPOConfig())


def test_while_every_validation_is_refused_the_smallest_blow_up_is_kept(tmp_path):
  cfg = ppo.PPOConfig(validation_hot_modules=40, validation_hot_limit=1.5)
  st = {}
  assert _keep(st, tmp_path, -1.0, 0, 3.0) == 0
  assert selection.needs_hot_check(st, +5.0, cfg)          # a worse mean is checked too
  assert _keep(st, tmp_path, 5.0, 10, 2.0) == 10           # smaller blow-up wins
  assert _keep(st, tmp_path, -4.0, 20, 2.5) == 10
  assert _keep(st, tmp_path, 9.0, 30, 1.1) == 30           # the first one within the limit
  assert not st["best_validation"]["refused"]
  assert not selection.needs_hot_check(st, 9.5, cfg)


def test_trainer_checks_the_hot_modules_only_for_a_validation_that_would_be_kept(setup, tmp_path):
  c, problem, pol, default, policy = setup
  cfg = ppo.PPOConfig(validation_modules=100, jobs=2, validation_hot_modules=2,
                      validation_hot_limit=100.0)
  t = ppo.Trainer(c.path, tmp_path / "run", warmstart=ROOT / "models" / "inlining_oz",
                  config=cfg)
  try:
    w = t.current_weights()
    val, cpu, hot = t.validate(w)
    worst, where = hot
    want = sorted(default, key=lambda n: (-default[n], n))[:2]
    assert t.state["hot_set"] == want
    ratio = {n: (policy[n] + 1) / (default[n] + 1) for n in want}
    assert worst == pytest.approx(max(ratio.values())) and where == max(ratio, key=ratio.get)
    t._keep_if_best(val, 0, t.export(w, 0), hot)
    assert t.state["best_validation"]["worst_hot_ratio"] == pytest.approx(worst)
    # The same policy again does not beat the best: no hot compiles.
    assert t.validate(w)[2] is None
  finally:
    t.close()
