"""Hand-written inlining policies used as baselines ("global knobs").

The -Oz default inlines a call site almost exactly when cost_estimate < threshold
(99.9% agreement on the default corpus' trace). `ThresholdShift(delta)` moves that
threshold for every call site: the global knob a learned per-call-site policy must beat.
"""
import numpy as np


class ThresholdShift:

  def __init__(self, delta: int):
    self.delta = int(delta)

  def act(self, observation):
    c = int(observation["cost_estimate"].reshape(-1)[0])
    t = int(observation["threshold"].reshape(-1)[0])
    return np.int64(1 if c < t + self.delta else 0)
