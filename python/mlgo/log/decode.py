"""Training-log stream -> JSON lines (what `bazel run //tools:decode_log` prints).

One line per observation:
  {"context": NAME, "index": N, "features": {NAME: [flat values]}, "outcome": [...]}
N is the observation number as the stream gives it (it restarts at 0 in each context);
"outcome" appears when the stream logs one for that observation. Non-finite floats
are written as the strings "NaN", "Infinity", "-Infinity" (JSON has no such numbers).
"""

import json
import math
from typing import Optional, TextIO

import numpy as np

import mlgo.log
from mlgo.log.spec import Context, Observation


def _values(a: np.ndarray) -> list:
  flat = a.reshape(-1)
  if flat.dtype.kind != "f":
    return flat.tolist()
  out = []
  for x in flat:
    if math.isfinite(x):
      # str() of a numpy float is its shortest repr at its own precision.
      out.append(float(str(x)))
    else:
      out.append("NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity"))
  return out


def decode(source, out: TextIO, reader_cls=None) -> int:
  """Writes one JSON line per observation of `source` (fd, file object or bytes)
  to `out`; returns the number of observations. Raises LogFormatError."""
  reader = (reader_cls or mlgo.log.StreamReader)(source)
  names = [f.name for f in reader.header]
  context = ""
  pending: Optional[dict] = None
  count = 0

  def flush():
    nonlocal pending
    if pending is not None:
      out.write(json.dumps(pending, allow_nan=False) + "\n")
      pending = None

  try:
    for ev in reader:
      if isinstance(ev, Observation):
        flush()
        pending = {"context": context, "index": ev.index,
                   "features": {n: _values(a) for n, a in zip(names, ev.features)}}
        count += 1
      elif isinstance(ev, Context):
        flush()
        context = ev.name
      else:  # Outcome: belongs to the observation just before it
        if pending is None or pending["index"] != ev.index:
          flush()
          pending = {"context": context, "index": ev.index}
        pending["outcome"] = _values(ev.value)
        flush()
  finally:
    flush()
  return count
