"""Reader throughput benchmark: native vs pure-Python on one large stream shaped
like the register-allocation eviction stream (20 [1,33] tensors + progress)."""

import io
import os
import time

import numpy as np

from mlgo.log import pyreader
from mlgo.log.spec import FeatureSpec

_I64, _F32 = np.dtype(np.int64), np.dtype(np.float32)
EVICTION_FEATURES = [
    FeatureSpec(n, _I64 if n in ("mask", "is_free", "is_hint", "is_local", "max_stage",
                                 "min_stage") else _F32, (1, 33))
    for n in ("mask", "is_free", "nr_urgent", "nr_broken_hints", "is_hint", "is_local",
              "nr_rematerializable", "nr_defs_and_uses", "weighed_reads_by_max",
              "weighed_writes_by_max", "weighed_read_writes_by_max",
              "weighed_indvars_by_max", "hint_weights_by_max", "start_bb_freq_by_max",
              "end_bb_freq_by_max", "hottest_bb_freq_by_max", "liverange_size",
              "use_def_density", "max_stage", "min_stage")
] + [FeatureSpec("progress", _F32, (1,))]
ADVICE = FeatureSpec("index_to_evict", _I64, (1,))


def make_stream(path: str, size_mb: float, seed: int = 0) -> dict:
  """Writes a realistic eviction-shaped stream of about size_mb MB to `path`."""
  import json
  rng = np.random.default_rng(seed)
  header = {"features": [f.to_json() for f in EVICTION_FEATURES], "advice": ADVICE.to_json()}
  obs_bytes = sum(f.nbytes for f in EVICTION_FEATURES)
  target = int(size_mb * 1e6)
  written = observations = contexts = 0
  with open(path, "wb") as out:
    line = json.dumps(header, separators=(",", ":")).encode() + b"\n"
    out.write(line)
    written += len(line)
    while written < target:
      n = int(rng.integers(1, 400))  # decisions in this function
      parts = [b'{"context":"_ZN4llvm%dfunction_%dEv"}\n' % (contexts, contexts)]
      cols = []
      for f in EVICTION_FEATURES:
        if f.dtype == _I64:
          cols.append(rng.integers(0, 2 if f.name != "max_stage" else 6,
                                   size=(n, f.size)).astype(np.int64).view(np.uint8))
        else:
          cols.append(rng.random((n, f.size), dtype=np.float32).view(np.uint8))
      block = np.concatenate(cols, axis=1)
      assert block.shape[1] == obs_bytes
      for i in range(n):
        parts.append(b'{"observation":%d}\n' % i)
        parts.append(block[i].tobytes())
        parts.append(b"\n")
      chunk = b"".join(parts)
      out.write(chunk)
      written += len(chunk)
      observations += n
      contexts += 1
  return {"bytes": written, "observations": observations, "contexts": contexts}


def _time(fn, repeat):
  best = float("inf")
  result = None
  for _ in range(repeat):
    t = time.perf_counter()
    result = fn()
    best = min(best, time.perf_counter() - t)
  return best, result


def run(path: str, repeat: int = 3, python_repeat: int = 1) -> dict:
  from mlgo.log import native
  if native is None:
    raise RuntimeError("the native reader is not built (//cc/log_reader:log_reader_py)")
  size = os.path.getsize(path)
  with open(path, "rb") as f:  # warm the page cache; both read from memory
    f.read()
  t_nat, logs_nat = _time(lambda: native.read_log(path), repeat)
  t_py, logs_py = _time(lambda: pyreader.read_log(path), python_repeat)
  # Same answer, or the numbers mean nothing.
  assert [l.name for l in logs_nat] == [l.name for l in logs_py]
  for a, b in zip(logs_nat, logs_py):
    for k in a.features:
      if not np.array_equal(a.features[k], b.features[k]):
        raise AssertionError(f"readers disagree on {a.name}/{k}")
  n_obs = sum(len(l) for l in logs_nat)
  del logs_py

  # Streaming API (what the environment uses per decision), on the same file.
  def stream(mod):
    fd = os.open(path, os.O_RDONLY)
    try:
      r = mod.StreamReader(fd)
      n = 0
      while r.next_event() is not None:
        n += 1
      return n
    finally:
      os.close(fd)
  t_nat_s, _ = _time(lambda: stream(native), 1)
  t_py_s, _ = _time(lambda: stream(pyreader), 1)
  mb = size / 1e6
  return {
      "bytes": size, "observations": n_obs,
      "native_read_log_mb_s": mb / t_nat, "python_read_log_mb_s": mb / t_py,
      "read_log_speedup": t_py / t_nat,
      "native_stream_mb_s": mb / t_nat_s, "python_stream_mb_s": mb / t_py_s,
      "stream_speedup": t_py_s / t_nat_s,
      "native_stream_obs_s": n_obs / t_nat_s, "python_stream_obs_s": n_obs / t_py_s,
  }
