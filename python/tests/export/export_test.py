"""tools/export_policy's library: a policy dir in, ready-to-use release artifacts out."""
import json
import os
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

from mlgo.export import aot, export, native, server as srv
from mlgo.policy.policy_io import load_policy
from mlgo.util.toolchain import toolchain

POLICIES = pathlib.Path("cc/aot")
PROGRAMS = sorted(pathlib.Path("testdata/release").glob("*.c"))


@pytest.fixture(autouse=True)
def _private_home(tmp_path, monkeypatch):
  # The XLA runtime object cache goes to a per-test home (the sandbox's HOME is read-only).
  monkeypatch.setenv("MLGO_HOME", str(tmp_path / "home"))


def _copy_policy(name, dst):
  # Bazel's outputs are read-only symlinks; export copies, so give it a plain dir.
  shutil.copytree(POLICIES / name, dst, symlinks=False)
  return dst


def test_export_inlining_policy(tmp_path):
  pol = _copy_policy("tiny_inlining", tmp_path / "policy")
  out = tmp_path / "out"
  res = export.export_policy(pol, out, llvm_versions=(22,), quiet=True)
  assert res.problem == "inlining"
  for rel in ("saved_policy/saved_model.pb", "policy.json", "weights.npz", "tflite/model.tflite",
              "tflite/output_spec.json", "aot/policy.h", "aot/policy.o",
              "aot/policy_metadata.o", "aot/mlgo_model.h", "inline_advisor.so", "export.json",
              "llvm_embed/InlinerSizeModel.h", "llvm_embed/InlinerSizeModel.o"):
    assert (out / rel).is_file(), rel
  # No TensorFlow at run time: the plugin needs only libLLVM and the C/C++ runtime.
  libs = native.shared_libraries(out / "inline_advisor.so")
  assert any(lib.startswith("libLLVM") for lib in libs)
  assert not [lib for lib in libs if "tensorflow" in lib or "xla" in lib]
  spec = json.loads((out / "tflite/output_spec.json").read_text())
  assert spec[0]["logging_name"] == "inlining_decision"
  assert spec[0]["tensor_spec"]["type"] == "int64_t" and spec[0]["tensor_spec"]["shape"] == [1]
  assert "class InlinerSizeModel" in (out / "llvm_embed/InlinerSizeModel.h").read_text()
  manifest = json.loads((out / "export.json").read_text())
  assert manifest["problem"] == "inlining"
  assert len(manifest["features"]) == 38
  assert manifest["sizes"]["plugin_llvm22"] == os.path.getsize(out / "inline_advisor.so")

  # The exported plugin decides like the Python policy, and like the Bazel-built one.
  policy = load_policy(pol)
  tc = toolchain(22)
  for src in PROGRAMS[:2]:
    logs = {}
    for tag, so in (("exp", out / "inline_advisor.so"),
                    ("bzl", pathlib.Path("cc/inline_plugin/plugin_tiny.so").resolve())):
      log = tmp_path / f"{src.stem}.{tag}.jsonl"
      env = dict(os.environ, MLGO_INLINE_LOG=str(log))
      r = subprocess.run([tc.clang, "-Oz", f"-fpass-plugin={so}", "-c", str(src), "-o",
                          str(tmp_path / f"{src.stem}.{tag}.o")], env=env, capture_output=True,
                         text=True)
      assert r.returncode == 0, r.stderr
      logs[tag] = [json.loads(x) for x in log.read_text().splitlines()]
    assert logs["exp"] == logs["bzl"]
    for row in logs["exp"]:
      obs = {k: np.array([v], np.int64) for k, v in row["features"].items()}
      assert int(policy.act(obs)) == row["decision"]
    assert ((tmp_path / f"{src.stem}.exp.o").read_bytes()
            == (tmp_path / f"{src.stem}.bzl.o").read_bytes())


def test_export_ir2vec_inlining_policy(tmp_path):
  """An inlining_ir2vec policy exports to a clang-22 plugin plus the vocabulary; the flags
  export.json names make clang send the embeddings, and the plugin decides like Python."""
  from mlgo.problems import ir2vec  # pylint: disable=import-outside-toplevel
  pol = _copy_policy("tiny_inlining_ir2vec", tmp_path / "policy")
  out = tmp_path / "out"
  res = export.export_policy(pol, out, llvm_versions=(22, 19), tflite=False,
                             llvm_embed=False, quiet=True)
  assert res.problem == "inlining_ir2vec"
  assert json.loads((out / "ir2vec_vocab.json").read_text()) == ir2vec.vocabulary()
  manifest = json.loads((out / "export.json").read_text())
  assert len(manifest["features"]) == 40
  assert manifest["checks"]["plugin_llvm19"].startswith("skipped: LLVM 19 sends no IR2Vec")
  assert not (out / "inline_advisor_llvm19.so").exists()
  flags = manifest["checks"]["clang_flags"].split()
  assert f"-ml-inliner-ir2vec-vocab-file={(out / 'ir2vec_vocab.json').resolve()}" in flags
  policy = load_policy(pol)
  log = tmp_path / "log.jsonl"
  env = dict(os.environ, MLGO_INLINE_LOG=str(log))
  for src in PROGRAMS:
    r = subprocess.run([toolchain(22).clang, "-Oz", f"-fpass-plugin={out / 'inline_advisor.so'}",
                        *flags, "-c", str(src), "-o", str(tmp_path / "x.o")], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
  rows = [json.loads(x) for x in log.read_text().splitlines()]
  assert rows and all(len(row["features"]["callee_embedding"]) == ir2vec.DIM for row in rows)
  for row in rows:
    obs = {k: np.array(v, np.float32) if isinstance(v, list) else np.array([v], np.int64)
           for k, v in row["features"].items()}
    assert int(policy.act(obs)) == row["decision"]


def test_export_priority_policy_builds_working_server(tmp_path):
  pol = _copy_policy("tiny_priority", tmp_path / "policy")
  out = tmp_path / "out"
  res = export.export_policy(pol, out, tflite=False, quiet=True)
  assert res.problem == "regalloc_priority"
  assert (out / "advisor_server").is_file() and not (out / "inline_advisor.so").exists()
  tc = toolchain(22)
  ll = tmp_path / "k.ll"
  subprocess.run([tc.clang, "-O2", "-S", "-emit-llvm", str(PROGRAMS[0]), "-o", str(ll)],
                 check=True)
  run = srv.run_with_server(str(out / "advisor_server"), "regalloc_priority",
                            lambda f: [tc.llc, str(ll), "-o", str(tmp_path / "k.o"), *f],
                            timeout=120)
  assert run.ok, (run.reason, run.server_stderr, run.compiler_stderr)
  assert "decisions" in run.server_stderr


def test_export_rejects_dir_without_saved_model(tmp_path):
  (tmp_path / "p").mkdir()
  (tmp_path / "p" / "policy.json").write_text("{}")
  with pytest.raises(aot.ExportError, match="no saved_policy/saved_model.pb"):
    export.export_policy(tmp_path / "p", tmp_path / "out", quiet=True)


def test_export_writes_the_saved_model_of_a_policy_dir_without_one(tmp_path):
  """A PPO iteration that was not validated has policy.json + weights.npz only: export
  builds its SavedModel, and that model decides as the numpy policy does."""
  import tensorflow as tf
  pol = _copy_policy("tiny_inlining", tmp_path / "policy")
  shutil.rmtree(pol / "saved_policy")
  out = tmp_path / "out"
  res = export.export_policy(pol, out, tflite=False, build_native=False, llvm_embed=False,
                             llvm_versions=(22,), quiet=True)
  assert res.problem == "inlining"
  assert res.checks["saved_model_written"] is True
  assert (out / "saved_policy" / "saved_model.pb").is_file()
  assert (out / "aot" / "policy.o").is_file()
  assert not (pol / "saved_policy").exists()   # the policy dir itself is left as it was
  numpy_policy = load_policy(pol)
  fn = tf.saved_model.load(str(out / "saved_policy")).signatures["action"]
  rng = np.random.default_rng(3)
  decisions = set()
  for _ in range(40):
    obs = {f["name"]: np.array([int(rng.integers(0, 400))], np.int64)
           for f in numpy_policy.features}
    got = int(fn(**{k: tf.constant(v) for k, v in obs.items()})["inlining_decision"][0])
    assert got == int(numpy_policy.act(obs))
    decisions.add(got)
  assert decisions == {0, 1}, decisions   # not one constant answer


def test_export_rejects_corrupt_saved_model(tmp_path):
  sm = tmp_path / "p" / "saved_policy"
  sm.mkdir(parents=True)
  (sm / "saved_model.pb").write_bytes(b"\x08\x96\x01 definitely not a SavedModel")
  with pytest.raises(aot.ExportError, match="saved_model.pb"):
    export.export_policy(tmp_path / "p", tmp_path / "out", quiet=True)


def test_read_signature_names_problem_and_features():
  spec = aot.read_signature(POLICIES / "tiny_eviction" / "saved_policy")
  assert spec.problem == "regalloc_eviction"
  assert spec.output.name == "index_to_evict" and spec.output.dtype == "int64_t"
  by_name = {t.name: t for t in spec.inputs}
  assert by_name["mask"].dtype == "int64_t" and by_name["mask"].elements == 33
  assert by_name["progress"].dtype == "float" and by_name["progress"].elements == 1
  assert len(spec.feature_names()) == 21


def test_model_header_lists_inputs(tmp_path):
  spec = aot.read_signature(POLICIES / "tiny_priority" / "saved_policy")
  aot.write_model_header(spec, tmp_path / "m.h", "policy.h", "ns::P")
  text = (tmp_path / "m.h").read_text()
  assert '{"li_size", "int64_t", 1, 8},' in text
  assert '{"weight", "float", 1, 4},' in text
  assert "using Model = ns::P;" in text
  assert 'kProblem = "regalloc_priority"' in text


def _ensemble_of_two_normalizations(tmp_path):
  """tiny_inlining and a second member with its own normalization and weights (as a
  second seed would have), ensembled: the input is encoded once per member."""
  from mlgo.policy import derived, policy_io  # pylint: disable=import-outside-toplevel
  a = _copy_policy("tiny_inlining", tmp_path / "a")
  pa = policy_io.load_policy(a)
  rng = np.random.default_rng(5)
  norms = [dict(d, mean=d["mean"] + 0.4, std=d["std"] * 1.3,
                boundaries=[float(np.float32(b * 1.5)) for b in d["boundaries"]])
           for d in pa.spec["normalization"]]
  w = {k: (v * rng.uniform(0.5, 1.5, v.shape)).astype(v.dtype) for k, v in pa.arch.w.items()}
  b = policy_io.write_policy_dir(tmp_path / "b", dict(pa.spec, normalization=norms), w,
                                 saved_model=False)
  ens = derived.ensemble_policies([a, b], tmp_path / "ensemble", saved_model=False)
  assert ens.normalizer.copies == 2
  return tmp_path / "ensemble"


@pytest.mark.parametrize("margin,outside,nonzero,below,ensemble", [
    (0.3, 0.0, (), None, False), (0.0, 2.0, (), None, False),
    (0.0, 0.0, ("last_call_to_static_bonus",), None, False),
    (0.0, 0.0, (), {"edge_count": 10}, False), (0.3, 1.5, (), None, True)])
def test_deferring_policy_plugin_matches_python(tmp_path, margin, outside, nonzero, below,
                                                ensemble):
  """A policy that takes the compiler's own decision where it is unsure (its two
  probabilities close, or an input beyond its training range), where a named input is
  nonzero or where one is under a threshold (edge_count 10: the calls left in these
  programs' modules run from 22 down to 1): the exported plugin feeds the default to
  the model and decides exactly like the Python policy. Also for an ensemble of members
  with their own normalizations."""
  from mlgo.policy import derived  # pylint: disable=import-outside-toplevel
  pol = (_ensemble_of_two_normalizations(tmp_path) if ensemble
         else _copy_policy("tiny_inlining", tmp_path / "policy"))
  policy = derived.with_deferral(pol, tmp_path / "deferring", margin=margin,
                                   outside=outside, nonzero=nonzero, below=below)
  out = tmp_path / "out"
  export.export_policy(tmp_path / "deferring", out, llvm_versions=(22,), quiet=True)
  tc = toolchain(22)
  rows = []
  for src in PROGRAMS:
    log = tmp_path / f"{src.stem}.jsonl"
    env = dict(os.environ, MLGO_INLINE_LOG=str(log))
    r = subprocess.run([tc.clang, "-Oz", f"-fpass-plugin={out / 'inline_advisor.so'}", "-c",
                        str(src), "-o", str(tmp_path / f"{src.stem}.o")], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows += [json.loads(x) for x in log.read_text().splitlines()]
  assert rows and all("default" in row for row in rows)
  for row in rows:
    obs = {k: np.array([v], np.int64) for k, v in row["features"].items()}
    obs["inlining_default"] = np.array([row["default"]], np.int64)
    assert int(policy.act(obs)) == row["decision"], row
  # Both kinds of decisions happened: deferred ones, and ones where the policy overrode
  # the default.
  assert 0 < policy.deferred < len(rows)
  assert any(row["decision"] != row["default"] for row in rows)
