"""The shipped deferring inliner on real clang-22 decisions: where the base model's two
probabilities are within the margin it answers clang's own decision, elsewhere exactly
what the base model answers."""
import pathlib

import numpy as np

from mlgo import env
from mlgo.env.modules import module_from_source
from mlgo.policy import policy_io
from mlgo.problems import get_problem

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


def test_defers_exactly_where_unsure(tmp_path):
  base = policy_io.load_policy(ROOT / "models" / "inlining_oz_ir2vec")
  deferring = policy_io.load_policy(ROOT / "models" / "inlining_oz_ir2vec_defer")
  margin = deferring.spec["defer"]["margin"]
  assert margin == 0.4 and deferring.spec["defer"]["feature"] == "inlining_default"
  problem = get_problem(base.problem)
  rows = []
  for src in PROGRAMS:
    pol = _Both(base, deferring)
    m = module_from_source(str(src), str(tmp_path), opt="Oz")
    r = env.compile_module(m, problem, pol)
    assert r.ok, r.reason
    rows += pol.rows
  assert len(rows) > 20
  for gap, b, default, d in rows:
    assert d == (default if gap < margin else b)
  assert any(g < margin for g, *_ in rows) and any(g >= margin for g, *_ in rows)
