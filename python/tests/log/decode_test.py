"""decode_log: JSON lines per observation, errors as one line with exit code 1."""

import io
import json
import subprocess

import numpy as np
import pytest

from mlgo.log import FeatureSpec, encode_log, pyreader
from mlgo.log.decode import decode
from mlgo.util import cli

FEATS = [FeatureSpec("m", np.dtype(np.int64), (1, 3)),
         FeatureSpec("w", np.dtype(np.float32), (2,))]
SCORE = FeatureSpec("reward", np.dtype(np.float64), ())


def tool():
  found = next((p for p in cli.runfile_candidates("tools/decode_log") if p.exists()), None)
  if found is None:
    pytest.fail("decode_log binary not in runfiles")
  return str(found)


def sample():
  return encode_log(FEATS, [
      ("f", [([[[1, 2, 3]], [0.1, float("inf")]], 2.5), ([[[4, 5, 6]], [-0.0, float("nan")]], None)]),
      ("g", [([[[7, 8, 9]], [1e-3, 3.0]], None)])], SCORE)


@pytest.mark.parametrize("native", [True, False])
def test_decode_lines(native):
  out = io.StringIO()
  n = decode(sample(), out, None if native else pyreader.StreamReader)
  assert n == 3
  lines = [json.loads(l) for l in out.getvalue().splitlines()]
  assert lines == [
      {"context": "f", "index": 0, "features": {"m": [1, 2, 3], "w": [0.1, "Infinity"]},
       "outcome": [2.5]},
      {"context": "f", "index": 1, "features": {"m": [4, 5, 6], "w": [-0.0, "NaN"]}},
      {"context": "g", "index": 0, "features": {"m": [7, 8, 9], "w": [0.001, 3.0]}},
  ]


def test_tool_prints_json_lines(tmp_path):
  p = tmp_path / "s.log"
  p.write_bytes(sample())
  r = subprocess.run([tool(), str(p)], capture_output=True, text=True, timeout=60)
  assert r.returncode == 0, r.stderr
  lines = r.stdout.splitlines()
  assert len(lines) == 3
  assert json.loads(lines[2]) == {"context": "g", "index": 0,
                                  "features": {"m": [7, 8, 9], "w": [0.001, 3.0]}}


def test_tool_reports_malformed_file(tmp_path):
  data = sample()
  p = tmp_path / "bad.log"
  g_at = data.index(b'{"context":"g"}')
  cut = g_at + 5
  p.write_bytes(data[:cut])
  r = subprocess.run([tool(), str(p)], capture_output=True, text=True, timeout=60)
  assert r.returncode == 1
  err = r.stderr.strip().splitlines()
  assert len(err) == 1
  assert str(p) in err[0] and f"byte {g_at}" in err[0]
  assert len(r.stdout.splitlines()) == 2  # what came before the error is printed


def test_tool_missing_file(tmp_path):
  r = subprocess.run([tool(), str(tmp_path / "nope.log")], capture_output=True, text=True,
                     timeout=60)
  assert r.returncode == 1 and "nope.log" in r.stderr and "cannot open" in r.stderr
