"""mlgo.credit: make_annotator's checks, and the IR2Native annotator on real clang-22
compiles (catch_rethrow.cpp, >50 decisions) with a model fitted on real rows."""
import pickle

import numpy as np
import pytest

from mlgo import credit, env
from mlgo.credit import ir2native as credit_i2n
from mlgo.env import inline_remarks
from mlgo.ir2native import model as model_lib
from mlgo.ir2native import states
from mlgo.problems import get_problem
from mlgo.util import toolchain

import i2ntestlib as lib


@pytest.fixture(scope="module")
def model_dir():
  return lib.shared_model_dir()


def test_make_annotator_checks(model_dir, tmp_path):
  assert credit.make_annotator("", model_dir, get_problem("inlining_ir2vec")) is None
  assert credit.make_annotator(None, "", get_problem("inlining")) is None
  with pytest.raises(ValueError, match="inlining_ir2vec"):
    credit.make_annotator("ir2native", model_dir, get_problem("inlining"))
  with pytest.raises(ValueError, match="credit_model"):
    credit.make_annotator("ir2native", "", get_problem("inlining_ir2vec"))
  with pytest.raises(ValueError, match="unknown credit 'nope'.*ir2native"):
    credit.make_annotator("nope", model_dir, get_problem("inlining_ir2vec"))
  with pytest.raises(ValueError, match=str(tmp_path / "no_model")):
    credit.make_annotator("ir2native", str(tmp_path / "no_model"),
                          get_problem("inlining_ir2vec"))
  a = credit.make_annotator("ir2native", model_dir, get_problem("inlining_ir2vec"))
  assert isinstance(a, credit_i2n.Annotator)
  assert a.model.fields == lib.FIELDS


def test_annotator_is_picklable(model_dir):
  a = credit.make_annotator("ir2native", model_dir, get_problem("inlining_ir2vec"))
  b = pickle.loads(pickle.dumps(a))
  s = np.abs(np.random.default_rng(0).normal(0, 20, (5, lib.STATE_WIDTH)))
  np.testing.assert_array_equal(a.model.predict(s), b.model.predict(s))


def _expected(m, stream, sizes):
  """The credit by hand: per inlined decision, f(caller after) - f(caller before) -
  [callee deleted] f(callee), times clip(real / predicted size of the functions)."""
  f = lambda s: float(m.predict(np.asarray(s)[None])[0])
  ds = stream.decisions
  out = np.zeros(len(ds))
  for i, d in enumerate(ds):
    if not stream.inlined[i]:
      continue
    nxt = next((j for j in range(i + 1, len(ds)) if ds[j].caller == d.caller), None)
    after = stream.caller[nxt] if nxt is not None else stream.caller[i] + stream.callee[i]
    out[i] = f(after) - f(stream.caller[i]) - (f(stream.callee[i]) if d.deleted else 0.0)
  ends = stream.end_states()
  fns = [fn for fn in ends if fn in sizes]
  pred = sum(f(ends[fn][0]) for fn in fns)
  k = float(np.clip(sum(sizes[fn] for fn in fns) / pred, 0.5, 2.0))
  return out * k, k


@pytest.mark.parametrize("policy", ["default", "random"])
def test_decision_deltas_on_a_real_compile(model_dir, tmp_path, policy):
  module = lib.source_module("catch_rethrow.cpp")
  pol = env.DefaultPolicy() if policy == "default" else env.RandomPolicy(seed=3)
  a = credit.make_annotator("ir2native", model_dir, get_problem("inlining_ir2vec"))
  res = env.compile_module(module, "inlining_ir2vec", pol, llvm_version=lib.LLVM,
                           annotator=a)
  assert res.ok, res.reason
  ann = res.annotations
  assert "error" not in ann, ann
  assert set(ann) == {"decision_delta", "calibration"}
  (t,) = res.trajectories
  assert res.decisions > 50
  (delta,) = ann["decision_delta"]
  (k,) = ann["calibration"]
  assert delta.dtype == np.float32 and delta.shape == (res.decisions,)
  assert np.isfinite(delta).all()
  acts = np.asarray(t.actions).ravel()
  assert (delta[acts == 0] == 0).all()
  assert (delta[acts != 0] != 0).any()
  assert 0.5 <= k <= 2.0
  # The same compile again (a deterministic policy), with the remarks and the object
  # kept: the credit recomputed by hand matches.
  f = str(tmp_path / "remarks.yaml")
  obj = str(tmp_path / "out.o")
  pol = env.DefaultPolicy() if policy == "default" else env.RandomPolicy(seed=3)
  res2 = env.compile_module(module, "inlining_ir2vec", pol, llvm_version=lib.LLVM,
                            output_path=obj,
                            extra_flags=["-opt-record-file", f, "-opt-record-passes",
                                         "inline"])
  assert res2.ok and res2.decisions == res.decisions
  np.testing.assert_array_equal(np.asarray(res2.trajectories[0].actions).ravel(), acts)
  stream = states.Stream.of(res2.trajectories[0].features, res2.trajectories[0].actions,
                            inline_remarks.parse(f))
  want, want_k = _expected(model_lib.SizeModel.load(model_dir), stream,
                           toolchain.function_sizes(obj))
  assert k == pytest.approx(want_k, rel=1e-9)
  np.testing.assert_allclose(delta, want, rtol=1e-4, atol=1e-3)


def test_deleted_callees_and_calibration(model_dir, tmp_path):
  f = str(tmp_path / "remarks.yaml")
  obj = str(tmp_path / "out.o")
  res = env.compile_module(lib.source_module("calls.c"), "inlining_ir2vec",
                           env.DefaultPolicy(), llvm_version=lib.LLVM, output_path=obj,
                           extra_flags=["-opt-record-file", f, "-opt-record-passes",
                                        "inline"])
  (t,) = res.trajectories
  stream = states.Stream.of(t.features, t.actions, inline_remarks.parse(f))
  a = credit_i2n.Annotator(model_lib.SizeModel.load(model_dir))
  sizes = toolchain.function_sizes(obj)
  d1, k1 = a.decision_deltas(stream, sizes)
  # calls.c deletes callees (its static helpers): their size comes off those decisions.
  deleted = np.array([d.deleted for d in stream.decisions])
  assert deleted.sum() >= 3
  want, want_k = _expected(a.model, stream, sizes)
  assert k1 == pytest.approx(want_k, rel=1e-9)
  np.testing.assert_allclose(d1, want, rtol=1e-6, atol=1e-6)
  assert (d1[deleted] < 0).any()
  # An object 100x bigger than predicted: k hits 2; 100x smaller: 0.5; deltas scale.
  d_big, k_big = a.decision_deltas(stream, {fn: 100 * s for fn, s in sizes.items()})
  d_small, k_small = a.decision_deltas(stream, {fn: s / 100 for fn, s in sizes.items()})
  assert (k_big, k_small) == (2.0, 0.5)
  np.testing.assert_allclose(d_big / 2.0, d1 / k1)
  np.testing.assert_allclose(d_small / 0.5, d1 / k1)
  # No function of the object known to the stream: no calibration.
  d_none, k_none = a.decision_deltas(stream, {"not_there": 10})
  assert k_none == 1.0
  np.testing.assert_allclose(d_none, d1 / k1)


def test_missing_remarks_land_in_annotations_error():
  class NoRemarks(credit_i2n.Annotator):

    def flags(self, tmpdir):
      return []

  a = NoRemarks(model_lib.SizeModel.load(lib.shared_model_dir()))
  res = env.compile_module(lib.source_module("calls.c"), "inlining_ir2vec",
                           env.DefaultPolicy(), llvm_version=lib.LLVM, annotator=a)
  assert res.ok and res.decisions == 14
  assert list(res.annotations) == ["error"]
  assert "inline-remarks.yaml" in res.annotations["error"]


def test_probes_measure_the_credit(model_dir, tmp_path):
  """Rollout probes with a credit model: each probe of an inlined decision carries the
  credit's predicted flip effect (minus its delta), the others NaN, and the stats say how
  well the predictions rank the measured changes."""
  from mlgo.training import rollouts
  policy = lib.data_path("models/inlining_oz_ir2vec")
  stats = rollouts.probe_corpus(lib.shared_corpus().path, policy, tmp_path / "probes",
                                max_probes=40, jobs=1, credit_model=model_dir)
  assert stats["modules"] == 2 and stats["failed"] == 0
  store = rollouts.ProbeStore(tmp_path / "probes")
  (sh,) = list(store.shards())
  inl = sh["probe_actions"] == 1
  assert inl.any() and (~inl).any()
  assert np.isnan(sh["probe_predicted"][~inl]).all()
  assert np.isfinite(sh["probe_predicted"][inl]).all()
  assert stats["credit_probes"] == int((inl & np.isfinite(sh["probe_sizes"])).sum()) > 0
  assert -1.0 <= stats["credit_spearman"] <= 1.0
