"""IR2Native credit for inlining: each decision's predicted effect on native size.

For decision d, inlining callee E into caller C (mlgo.ir2native.states gives C's state
before d and right after it):

    delta_d = f(C after d) - f(C before d) - [E deleted by d] * f(E)

with f the IR2Native model (a function's final native size from its state); decisions
that did not inline have delta 0. Calibrated per compile against the real object: the
model's total over the functions the object holds, against their real total, scales every
delta (k = real / predicted, clipped to [0.5, 2]), so a module the model under- or
over-sizes does not weigh more or less than its bytes.
"""

import numpy as np

from mlgo.ir2native import model as model_lib
from mlgo.ir2native import states as states_lib
from mlgo.util import toolchain

CALIBRATION_CLIP = (0.5, 2.0)


class Annotator:
  """compile_module annotator (picklable: the model is numpy arrays)."""

  def __init__(self, size_model: model_lib.SizeModel):
    self.model = size_model

  @classmethod
  def for_problem(cls, model_path, problem):
    names = {s.name for s in problem.features}
    need = {f"{side}_{states_lib.EMBEDDING}" for side in ("caller", "callee")}
    if not need <= names:
      raise ValueError(f"IR2Native credit needs the caller/callee embeddings; problem "
                       f"{problem.name} has none (use inlining_ir2vec)")
    if not model_path:
      raise ValueError("IR2Native credit needs PPOConfig.credit_model (a directory "
                       "written by `ir2native train`)")
    return cls(model_lib.SizeModel.load(model_path))

  def flags(self, tmpdir):
    return states_lib.annotator_flags(tmpdir)

  def annotate(self, outputs, trajectories):
    deltas, ks = [], []
    sizes = toolchain.function_sizes(outputs["object"])
    for stream in states_lib.streams(outputs, trajectories, where="credit"):
      delta, k = self.decision_deltas(stream, sizes)
      deltas.append(delta.astype(np.float32))
      ks.append(k)
    return {"decision_delta": deltas, "calibration": ks}

  def decision_deltas(self, stream: states_lib.Stream, sizes: dict):
    f = self.model.predict
    delta = np.where(stream.inlined, f(stream.next_caller_state()) - f(stream.caller), 0.0)
    deleted = np.array([d.deleted for d in stream.decisions], bool)
    if deleted.any():
      delta[deleted] -= f(stream.callee[deleted])
    ends = stream.end_states()
    fns = [fn for fn in ends if fn in sizes]
    k = 1.0
    if fns:
      pred = float(f(np.stack([ends[fn][0] for fn in fns])).sum())
      real = float(sum(sizes[fn] for fn in fns))
      if pred > 0:
        k = float(np.clip(real / pred, *CALIBRATION_CLIP))
    return delta * k, k
