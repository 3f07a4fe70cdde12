"""Release path end to end with real clang-22/19, opt-22 and llc-22.

Policies are the tiny ones of //cc/aot (random weights, the training format); the plugins
and servers are the Bazel-built ones. Decisions are compared one by one with the Python
policy (mlgo.training's numpy evaluator and the TF SavedModel) on the exact features the
compiler computed.
"""
import filecmp
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

from mlgo import env as mlgo_env
from mlgo.export import server as srv
from mlgo.log import read_log
from mlgo.policy.policy_io import load_policy
from mlgo.util.toolchain import toolchain

PLUGIN = pathlib.Path("cc/inline_plugin/plugin_tiny.so")
PLUGIN_IR2VEC = pathlib.Path("cc/inline_plugin/plugin_tiny_ir2vec.so")
PLUGIN_CTX = pathlib.Path("cc/inline_plugin/plugin_tiny_ctx.so")
PLUGIN19 = pathlib.Path("cc/inline_plugin/plugin_tiny_llvm19.so")
PLUGIN_MISMATCH = pathlib.Path("cc/inline_plugin/plugin_tiny_mismatch.so")
SERVERS = pathlib.Path("cc/advisor_server")
POLICIES = pathlib.Path("cc/aot")
PROGRAMS = sorted(pathlib.Path("testdata/release").glob("*.c"))


def _clang(version, src, out, plugin=None, log=None, extra=()):
  env = dict(os.environ)
  env.pop("MLGO_INLINE_LOG", None)
  if log:
    env["MLGO_INLINE_LOG"] = str(log)
  cmd = [toolchain(version).clang, "-Oz", "-c", str(src), "-o", str(out), *extra]
  if plugin:
    cmd.insert(1, f"-fpass-plugin={plugin.resolve()}")
  return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


def _read_decisions(log):
  return [json.loads(line) for line in pathlib.Path(log).read_text().splitlines()]


def _python_decision(policy, features: dict) -> int:
  # Scalars are int64 counts; lists are the float32 IR2Vec embeddings.
  obs = {k: np.array(v, np.float32) if isinstance(v, list) else np.array([v], np.int64)
         for k, v in features.items()}
  return int(policy.act(obs))


def _ir2vec_flags(tmp_path):
  from mlgo.problems import ir2vec  # pylint: disable=import-outside-toplevel
  return ir2vec.clang_args(ir2vec.vocabulary_path(tmp_path))


def test_programs_present():
  assert len(PROGRAMS) >= 3


def test_plugin_decisions_match_python_policy(tmp_path):
  policy = load_policy(POLICIES / "tiny_inlining")
  rows = []
  for src in PROGRAMS:
    log = tmp_path / (src.stem + ".jsonl")
    res = _clang(22, src, tmp_path / (src.stem + ".o"), PLUGIN, log)
    assert res.returncode == 0, res.stderr
    rows += _read_decisions(log)
  assert len(rows) >= 30
  decisions = [r["decision"] for r in rows]
  # The test policy must exercise both answers, or agreement would prove little.
  assert 0 < sum(decisions) < len(decisions)
  assert set(rows[0]["features"]) == set(policy.input_names)
  mismatches = [(r["caller"], r["callee"], r["decision"])
                for r in rows if _python_decision(policy, r["features"]) != r["decision"]]
  assert mismatches == []


def test_ir2vec_plugin_decisions_match_python_policy(tmp_path):
  """A policy that also takes clang-22's IR2Vec embeddings (problem inlining_ir2vec) runs
  in stock clang given the vocabulary, and decides as the Python policy does."""
  policy = load_policy(POLICIES / "tiny_inlining_ir2vec")
  flags = _ir2vec_flags(tmp_path)
  rows = []
  for src in PROGRAMS:
    log = tmp_path / (src.stem + ".jsonl")
    res = _clang(22, src, tmp_path / (src.stem + ".o"), PLUGIN_IR2VEC, log, extra=flags)
    assert res.returncode == 0, res.stderr
    rows += _read_decisions(log)
  assert len(rows) >= 30
  assert set(rows[0]["features"]) == set(policy.input_names)
  assert all(len(r["features"][k]) == 18 for r in rows
             for k in ("callee_embedding", "caller_embedding"))
  # Real instruction counts, not zeros: every caller has instructions.
  assert all(sum(r["features"]["caller_embedding"]) > 0 for r in rows)
  decisions = [r["decision"] for r in rows]
  assert 0 < sum(decisions) < len(decisions)
  mismatches = [(r["caller"], r["callee"], r["decision"])
                for r in rows if _python_decision(policy, r["features"]) != r["decision"]]
  assert mismatches == []


def test_context_plugin_compiles_as_the_training_channel(tmp_path):
  """A policy that takes the call-site context features (problem inlining_ctx): the
  release plugin computes them in-process, decides as the Python policy does on them, and
  gives the object the same policy gets through the training channel (context plugin)."""
  policy = load_policy(POLICIES / "tiny_inlining_ctx")
  rows = []
  for src in PROGRAMS:
    log = tmp_path / (src.stem + ".jsonl")
    released = tmp_path / (src.stem + ".o")
    res = _clang(22, src, released, PLUGIN_CTX, log)
    assert res.returncode == 0, res.stderr
    rows += _read_decisions(log)
    (tmp_path / src.stem).mkdir()
    m = mlgo_env.module_from_source(str(src), str(tmp_path / src.stem), opt="Oz")
    trained = tmp_path / (src.stem + ".channel.o")
    r = mlgo_env.compile_module(m, "inlining_ctx", policy, llvm_version=22,
                                output_path=str(trained))
    assert r.ok, r.reason
    assert filecmp.cmp(released, trained, shallow=False), src.name
  assert len(rows) >= 30
  assert set(rows[0]["features"]) == set(policy.input_names)
  decisions = [r["decision"] for r in rows]
  assert 0 < sum(decisions) < len(decisions)
  # Copies are counted: some callee is inlined more than once somewhere.
  assert max(r["features"]["callee_times_inlined"] for r in rows) >= 1
  mismatches = [(r["caller"], r["callee"], r["decision"])
                for r in rows if _python_decision(policy, r["features"]) != r["decision"]]
  assert mismatches == []


def test_ir2vec_plugin_without_vocabulary_names_the_flags(tmp_path):
  res = _clang(22, PROGRAMS[0], tmp_path / "x.o", PLUGIN_IR2VEC)
  assert res.returncode != 0
  assert "callee_embedding" in res.stderr
  assert "-ml-inliner-ir2vec-vocab-file=" in res.stderr and "Stack dump" not in res.stderr


def test_plugin_decisions_match_tf_saved_model(tmp_path):
  import tensorflow as tf
  fn = tf.saved_model.load(str(POLICIES / "tiny_inlining" / "saved_policy")).signatures["action"]
  log = tmp_path / "vm.jsonl"
  assert _clang(22, PROGRAMS[-1], tmp_path / "vm.o", PLUGIN, log).returncode == 0
  rows = _read_decisions(log)
  assert rows
  for r in rows:
    out = fn(**{k: tf.constant([v], tf.int64) for k, v in r["features"].items()})
    assert int(out["inlining_decision"].numpy()[0]) == r["decision"], r


def test_plugin_changes_inlining_and_is_deterministic(tmp_path):
  differs = 0
  for src in PROGRAMS:
    a, b, plain = (tmp_path / f"{src.stem}.{k}.o" for k in ("a", "b", "plain"))
    assert _clang(22, src, a, PLUGIN).returncode == 0
    assert _clang(22, src, b, PLUGIN).returncode == 0
    assert _clang(22, src, plain).returncode == 0
    assert a.read_bytes() == b.read_bytes(), f"{src}: two plugin compiles differ"
    differs += a.read_bytes() != plain.read_bytes()
  # The policy is not the default heuristic: some object must change.
  assert differs >= 1


def test_plugin_without_log_gives_same_object(tmp_path):
  src = PROGRAMS[0]
  assert _clang(22, src, tmp_path / "a.o", PLUGIN, tmp_path / "l.jsonl").returncode == 0
  assert _clang(22, src, tmp_path / "b.o", PLUGIN).returncode == 0
  assert filecmp.cmp(tmp_path / "a.o", tmp_path / "b.o", shallow=False)


def test_plugin_in_opt(tmp_path):
  tc = toolchain(22)
  ll = tmp_path / "t.ll"
  subprocess.run([tc.clang, "-Oz", "-Xclang", "-disable-llvm-passes", "-S", "-emit-llvm",
                  str(PROGRAMS[0]), "-o", str(ll)], check=True)
  env = dict(os.environ, MLGO_INLINE_LOG=str(tmp_path / "opt.jsonl"))
  res = subprocess.run([tc.opt, f"-load-pass-plugin={PLUGIN.resolve()}", "-passes=default<Oz>",
                        str(ll), "-o", str(tmp_path / "t.bc")], capture_output=True, text=True,
                       env=env)
  assert res.returncode == 0, res.stderr
  assert len(_read_decisions(tmp_path / "opt.jsonl")) > 0


def test_plugin_llvm19_matches_python_policy(tmp_path):
  policy = load_policy(POLICIES / "tiny_inlining")
  log = tmp_path / "l19.jsonl"
  for src in PROGRAMS:
    res = _clang(19, src, tmp_path / (src.stem + ".o"), PLUGIN19, log)
    assert res.returncode == 0, res.stderr
  rows = _read_decisions(log)
  assert len(rows) >= 20
  assert all(_python_decision(policy, r["features"]) == r["decision"] for r in rows)


def test_plugin_for_wrong_llvm_is_refused(tmp_path):
  res = _clang(22, PROGRAMS[0], tmp_path / "x.o", PLUGIN19)
  assert res.returncode != 0
  assert "API version" in res.stderr


def test_feature_mismatch_fails_clearly_at_load(tmp_path):
  res = _clang(22, PROGRAMS[0], tmp_path / "x.o", PLUGIN_MISMATCH)
  assert res.returncode != 0
  assert not (tmp_path / "x.o").exists()
  assert "does not match" in res.stderr
  assert "'callsite_height'" in res.stderr
  assert "loading the plugin" in res.stderr
  # A configuration error, not a compiler crash report.
  assert "Stack dump" not in res.stderr


def test_server_inlining_equals_plugin(tmp_path):
  """Channel (interactive mode) and in-process plugin: same decisions, same object."""
  tc = toolchain(22)
  for src in PROGRAMS:
    plugin_obj, server_obj = tmp_path / f"{src.stem}.p.o", tmp_path / f"{src.stem}.s.o"
    plog, slog = tmp_path / f"{src.stem}.p.jsonl", tmp_path / f"{src.stem}.s.log"
    assert _clang(22, src, plugin_obj, PLUGIN, plog).returncode == 0
    run = srv.run_with_server(
        str(SERVERS / "server_tiny_inlining"), "inlining",
        lambda flags: [tc.clang, "-Oz", "-c", str(src), "-o", str(server_obj), *flags],
        tool="clang", timeout=120, log_path=str(slog))
    assert run.ok, (run.reason, run.compiler_stderr, run.server_stderr)
    plugin_d = [r["decision"] for r in _read_decisions(plog)]
    server_d = [int(float(line.split("\t")[2])) for line in slog.read_text().splitlines()]
    assert plugin_d == server_d
    assert plugin_obj.read_bytes() == server_obj.read_bytes()


@pytest.fixture(scope="module")
def pressure_ll(tmp_path_factory):
  out = tmp_path_factory.mktemp("ir") / "pressure.ll"
  src = pathlib.Path("testdata/release/kernel.c")
  subprocess.run([toolchain(22).clang, "-O2", "-S", "-emit-llvm", str(src), "-o", str(out)],
                 check=True)
  return out


def _llc_with_server(server, problem, ll, obj, tmp_path, tag):
  tc = toolchain(22)
  log, rec = tmp_path / f"{tag}.log", tmp_path / f"{tag}.rec"
  run = srv.run_with_server(str(server), problem,
                            lambda flags: [tc.llc, str(ll), "-o", str(obj), "-filetype=obj",
                                           *flags],
                            timeout=120, log_path=str(log), record_path=str(rec))
  assert run.ok, (run.reason, run.compiler_stderr, run.server_stderr)
  lines = [line.split("\t") for line in log.read_text().splitlines()]
  return lines, read_log(rec.read_bytes())


def _python_eviction(policy, obs):
  a = int(policy.act(obs))
  mask = np.asarray(obs["mask"]).reshape(-1)
  if not (0 <= a < mask.size) or mask[a] != 1:
    if mask[32] == 1:
      a = 32
    else:
      valid = np.flatnonzero(mask[:32])
      a = int(valid[0]) if len(valid) else int(np.flatnonzero(mask)[0])
  return a


def test_server_eviction_matches_python_policy(tmp_path, pressure_ll):
  policy = load_policy(POLICIES / "tiny_eviction")
  lines, logs = _llc_with_server(SERVERS / "server_tiny_eviction", "regalloc_eviction",
                                 pressure_ll, tmp_path / "a.o", tmp_path, "ev")
  expected, undefined = [], 0
  with np.errstate(all="ignore"):
    for ctx in logs:
      n = len(next(iter(ctx.features.values())))
      for i in range(n):
        obs = {k: v[i] for k, v in ctx.features.items()}
        logits = policy.dist_params_batch({k: v[None] for k, v in obs.items()})["logits"]
        if not np.all(np.isfinite(logits)):
          # Infinite features (LLVM uses inf weights) make this untrained net output NaN;
          # argmax over NaN is arbitrary (numpy, TF and XLA each pick another column).
          expected.append(None)
          undefined += 1
          continue
        expected.append((ctx.name, _python_eviction(policy, obs)))
  got = [(c, int(float(d))) for c, _, d, _ in lines]
  assert len(got) == len(expected) > 10
  assert len(got) - undefined >= 20
  assert [g for g, e in zip(got, expected) if e is not None] == [e for e in expected if e]
  # Every answer the server gave was a valid column.
  idx = 0
  for ctx in logs:
    for i in range(len(ctx.features["mask"])):
      assert ctx.features["mask"][i].reshape(-1)[got[idx][1]] == 1
      idx += 1
  # Deterministic: a second run gives the same object.
  _llc_with_server(SERVERS / "server_tiny_eviction", "regalloc_eviction", pressure_ll,
                   tmp_path / "b.o", tmp_path, "ev2")
  assert (tmp_path / "a.o").read_bytes() == (tmp_path / "b.o").read_bytes()


def test_server_priority_matches_python_policy(tmp_path, pressure_ll):
  policy = load_policy(POLICIES / "tiny_priority")
  lines, logs = _llc_with_server(SERVERS / "server_tiny_priority", "regalloc_priority",
                                 pressure_ll, tmp_path / "p.o", tmp_path, "pr")
  expected = []
  with np.errstate(all="ignore"):
    for ctx in logs:
      n = len(ctx.features["li_size"])
      for i in range(n):
        v = float(np.float32(policy.act({k: a[i] for k, a in ctx.features.items()})))
        expected.append(v if np.isfinite(v) else 0.0)
  got = [float(d) for _, _, d, _ in lines]
  assert len(got) > 10
  # XLA's float32 matmul vs numpy's: the same up to rounding (a few ulps).
  np.testing.assert_allclose(got, expected, rtol=2e-6, atol=1e-6)


def test_server_feature_mismatch_fails_clearly(tmp_path):
  tc = toolchain(22)
  run = srv.run_with_server(
      str(SERVERS / "server_tiny_mismatch"), "inlining",
      lambda flags: [tc.clang, "-Oz", "-c", str(PROGRAMS[0]), "-o", str(tmp_path / "x.o"),
                     *flags], tool="clang", timeout=60)
  assert not run.ok
  assert run.server_returncode == 2
  assert "does not match" in run.server_stderr
  assert "'callsite_height'" in run.server_stderr


def test_channel_flags():
  assert srv.channel_flags("regalloc_eviction", "/x/b") == [
      "-regalloc-enable-advisor=release", "-regalloc-evict-interactive-channel-base=/x/b"]
  assert srv.channel_flags("inlining", "/b", tool="clang")[:2] == [
      "-mllvm", "-enable-ml-inliner=release"]
  with pytest.raises(ValueError, match="unknown problem"):
    srv.channel_flags("vectorize", "/b")


def _feed_server(tmp_path, payload: bytes):
  base = str(tmp_path / "chan")
  os.mkfifo(base + ".in")
  os.mkfifo(base + ".out")
  p = subprocess.Popen([str(SERVERS / "server_tiny_priority"), f"--channel_base={base}"],
                       stderr=subprocess.PIPE)
  with open(base + ".out", "wb") as f:
    f.write(payload)
  _, err = p.communicate(timeout=30)
  return p.returncode, err.decode()


def test_server_rejects_malformed_header(tmp_path):
  rc, err = _feed_server(tmp_path, b'{"features": [{"name": "li_size", "type"\n')
  assert rc == 1
  assert "bad header line" in err


def test_server_rejects_truncated_observation(tmp_path):
  header = (b'{"features": [{"name": "li_size", "port": 0, "shape": [1], "type": "int64_t"}, '
            b'{"name": "stage", "port": 0, "shape": [1], "type": "int64_t"}, '
            b'{"name": "weight", "port": 0, "shape": [1], "type": "float"}], '
            b'"advice": {"name": "priority", "port": 0, "shape": [1], "type": "float"}}\n')
  rc, err = _feed_server(tmp_path, header + b'{"context": "f"}\n{"observation": 0}\n' + b"\x01" * 7)
  assert rc == 1
  assert "truncated observation 0" in err
