"""The native reader built on first use outside Bazel (mlgo.log.build_native): a fresh
Python process with only the mlgo package on its path compiles it once, reads streams as
the pure-Python reader does, and falls back to that reader, with a warning naming the
cause, when the compiler fails (then it does not try again)."""

import json
import os
import pathlib
import subprocess
import sys

import mlgo
from logtestlib import synthetic_stream

# Reads a stream with mlgo.log's reader and with the pure-Python one; prints what was used.
CHILD = r"""
import json, sys
import numpy as np
import mlgo.log
from mlgo.log import pyreader

def flat(logs):
  return [(c.name, sorted((k, v.dtype.str, v.tolist()) for k, v in c.features.items()),
           None if c.outcomes is None else c.outcomes.tolist(),
           None if c.indices is None else c.indices.tolist()) for c in logs]

got, want = mlgo.log.read_log(sys.argv[1]), pyreader.read_log(sys.argv[1])
print(json.dumps({"native": mlgo.log.NATIVE,
                  "module": getattr(sys.modules.get("mlgo_log_reader_native"), "__file__", None),
                  "same": flat(got) == flat(want), "contexts": len(got)}))
"""


def child(tmp_path, **env):
  """Runs CHILD in a process that sees only the mlgo package (not Bazel's built module)."""
  stream = tmp_path / "stream.log"
  if not stream.exists():
    stream.write_bytes(synthetic_stream(seed=3, contexts=4)[3])
  full = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CXX")}
  full.update(PYTHONPATH=str(pathlib.Path(mlgo.__file__).parent.parent),
              MLGO_HOME=str(tmp_path / "home"), **env)
  res = subprocess.run([sys.executable, "-c", CHILD, str(stream)], env=full,
                       capture_output=True, text=True, timeout=900, cwd=tmp_path)
  assert res.returncode == 0, res.stderr
  return json.loads(res.stdout.strip().splitlines()[-1]), res.stderr


def test_compiled_once_then_reused_and_reads_like_python(tmp_path):
  first, err = child(tmp_path)
  assert first["native"] and first["same"] and first["contexts"] == 4, (first, err)
  home = tmp_path / "home" / "log_reader"
  assert first["module"].startswith(str(home)), first
  assert "compiling the native log reader" in err
  built = list(home.glob("*/mlgo_log_reader_native*.so"))
  assert len(built) == 1
  stamp = built[0].stat().st_mtime_ns
  second, err = child(tmp_path)
  assert second["native"] and second["same"] and second["module"] == first["module"]
  assert "compiling" not in err and built[0].stat().st_mtime_ns == stamp


def test_compiler_failure_falls_back_once_and_is_not_retried(tmp_path):
  calls = tmp_path / "calls"
  fake = tmp_path / "broken-c++"
  fake.write_text("#!/bin/sh\n"
                  "if [ \"$1\" = --version ]; then echo 'broken c++ 1.0'; exit 0; fi\n"
                  f"echo compile >> {calls}\n"
                  "echo 'fatal error: the disk is full' >&2; exit 1\n")
  fake.chmod(0o755)
  for _ in range(2):
    got, err = child(tmp_path, CXX=str(fake))
    assert not got["native"] and got["same"] and got["module"] is None, got
    assert "pure-Python" in err and "the disk is full" in err, err
  assert calls.read_text().splitlines() == ["compile"]  # the failure was recorded


def test_turned_off_by_the_environment(tmp_path):
  got, err = child(tmp_path, MLGO_NATIVE_READER="0")
  assert not got["native"] and got["same"], got
  assert not (tmp_path / "home" / "log_reader").exists() and "compiling" not in err
