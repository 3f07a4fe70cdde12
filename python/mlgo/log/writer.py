"""Encoder of the training-log stream, the inverse of the readers (tests, tools)."""

import json
from typing import Optional, Sequence

import numpy as np

from mlgo.log.spec import FeatureSpec


def _dumps(obj) -> bytes:
  return json.dumps(obj, separators=(",", ":")).encode("utf-8")


class LogWriter:
  """Writes a stream to a binary file object, as LLVM's TrainingLogger does."""

  def __init__(self, out, features: Sequence[FeatureSpec],
               score: Optional[FeatureSpec] = None,
               advice: Optional[FeatureSpec] = None):
    self._out = out
    self.features = list(features)
    self.score = score
    header = {"features": [f.to_json() for f in self.features]}
    if score is not None:
      header["score"] = score.to_json()
    if advice is not None:
      header["advice"] = advice.to_json()
    out.write(_dumps(header) + b"\n")

  def context(self, name: str) -> None:
    self._out.write(_dumps({"context": name}) + b"\n")

  def observation(self, index: int, values: Sequence) -> None:
    if len(values) != len(self.features):
      raise ValueError(f"{len(values)} values for {len(self.features)} features")
    parts = [_dumps({"observation": int(index)}), b"\n"]
    for spec, v in zip(self.features, values):
      a = np.asarray(v, dtype=spec.dtype)
      if a.size != spec.size:
        raise ValueError(f"feature {spec.name}: {a.size} values, spec has {spec.size}")
      parts.append(a.tobytes())
    parts.append(b"\n")
    self._out.write(b"".join(parts))

  def outcome(self, index: int, value) -> None:
    if self.score is None:
      raise ValueError("the header has no score")
    a = np.asarray(value, dtype=self.score.dtype)
    if a.size != self.score.size:
      raise ValueError(f"score: {a.size} values, spec has {self.score.size}")
    self._out.write(_dumps({"outcome": int(index)}) + b"\n" + a.tobytes() + b"\n")


def write_log(out, features: Sequence[FeatureSpec], contexts,
              score: Optional[FeatureSpec] = None,
              advice: Optional[FeatureSpec] = None) -> None:
  """contexts: iterable of (name or None, [(features_list, outcome_or_None), ...]).
  A None name writes no context line (as interactive streams do)."""
  w = LogWriter(out, features, score, advice)
  for name, records in contexts:
    if name is not None:
      w.context(name)
    for i, (values, outcome) in enumerate(records):
      w.observation(i, values)
      if outcome is not None:
        w.outcome(i, outcome)


def encode_log(features, contexts, score=None, advice=None) -> bytes:
  import io
  buf = io.BytesIO()
  write_log(buf, features, contexts, score, advice)
  return buf.getvalue()
