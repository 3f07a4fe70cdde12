"""Default replay through the interactive channel reproduces the plain compile byte for
byte (inlining, LLVM 22 and 19), including `clang -Oz -c` from source."""
import filecmp
import os
import subprocess

import numpy as np
import pytest

from mlgo import env, problems
from mlgo.util import toolchain

import envtestlib as lib

PROGRAMS = ["calls.c", "pressure.c", "nocalls.c"]


@pytest.mark.parametrize("version", [22, 19])
@pytest.mark.parametrize("name", PROGRAMS)
def test_default_replay_is_byte_identical(tmp_path, name, version):
  m = lib.inlining_module(name, version)
  replay = tmp_path / "replay.o"
  res = env.compile_module(m, "inlining", env.DefaultPolicy(), llvm_version=version,
                           output_path=str(replay))
  assert res.ok, res.reason
  plain = tmp_path / "plain.o"
  env.plain_compile(m, "inlining", llvm_version=version, output_path=str(plain))
  assert filecmp.cmp(replay, plain, shallow=False)
  # ... and the same object as the ordinary driver command on the source.
  driver = tmp_path / "driver.o"
  subprocess.run([toolchain.toolchain(version).clang, "-Oz", "-c", lib.program(name),
                  "-o", str(driver)], check=True)
  assert filecmp.cmp(replay, driver, shallow=False)
  assert res.reward == {"text_size": toolchain.text_size(str(plain))}
  if name == "calls.c":
    assert res.decisions == 14
  elif name == "nocalls.c":  # no call sites; pressure.c only calls an external function
    assert res.decisions == 0 and res.trajectories == []


@pytest.mark.parametrize("version", [22, 19])
def test_default_comes_from_the_right_slot(version):
  """LLVM 19 sends the default in callee_basic_block_count; both versions must agree."""
  res = env.compile_module(lib.inlining_module("calls.c", version), "inlining",
                           env.DefaultPolicy(), llvm_version=version)
  assert res.ok, res.reason
  (traj,) = res.trajectories
  assert traj.default_actions is not None
  np.testing.assert_array_equal(traj.actions, traj.default_actions)
  assert set(traj.default_actions.tolist()) == {0, 1}  # some inlined, some not
  assert set(traj.features) == set(problems.get_problem("inlining").feature_names)
  assert all(v.shape == (len(traj), 1) for v in traj.features.values())
  bbs = traj.features["callee_basic_block_count"].ravel()
  if version == 19:
    assert (bbs == 0).all()  # the slot's value was the default decision, hidden
  else:
    assert bbs.max() > 1


def test_llvm19_and_22_make_the_same_decisions_on_calls():
  a = env.compile_module(lib.inlining_module("calls.c", 22), "inlining", env.DefaultPolicy(),
                         llvm_version=22)
  b = env.compile_module(lib.inlining_module("calls.c", 19), "inlining", env.DefaultPolicy(),
                         llvm_version=19)
  assert a.ok and b.ok
  np.testing.assert_array_equal(a.trajectories[0].default_actions,
                                b.trajectories[0].default_actions)


def test_policy_changes_the_object(tmp_path):
  """Never inlining must give a different (here: larger) object than the default."""
  class Never:
    def act(self, obs):
      return np.int64(0)
  m = lib.inlining_module("calls.c", 22)
  never = env.compile_module(m, "inlining", Never())
  default = env.compile_module(m, "inlining", env.DefaultPolicy())
  assert never.ok and default.ok
  assert (never.trajectories[0].actions == 0).all()
  assert never.reward["text_size"] != default.reward["text_size"]


def _corpus_sample(version, n=4):
  from mlgo.util import cli
  import pathlib, pwd
  # Bazel's test environment may hide $HOME; the passwd home still finds the cache.
  homes = [cli.mlgo_home(), pathlib.Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "mlgo"]
  paths = [h / "corpora" / f"default-llvm{version}-Oz" for h in homes]
  path = next((p for p in paths if (p / "corpus_description.json").exists()), None)
  if path is None:
    return None
  from mlgo.corpus import load_corpus
  mods = load_corpus(path).modules
  step = max(1, len(mods) // n)
  return mods[::step][:n]


@pytest.mark.parametrize("version", [22, 19])
def test_default_replay_on_corpus_sample(tmp_path, version):
  """Corpus modules (bitcode + the cc1 flags the corpus keeps) replay byte for byte: a
  sample of the default corpus when it is built, else a corpus made here from the test
  programs (C and C++), so a fresh machine checks the corpus path too."""
  sample = _corpus_sample(version)
  if not sample:
    from mlgo.training import testing  # pylint: disable=import-outside-toplevel
    path = testing.make_tiny_corpus(
        tmp_path / "corpus", [lib.program(n) for n in ("many_calls.c", "calls.c",
                                                      "catch_rethrow.cpp")],
        llvm_version=version)
    from mlgo.corpus import load_corpus  # pylint: disable=import-outside-toplevel
    sample = load_corpus(path).modules
    assert {m.language for m in sample} == {"c", "c++"}
  decisions = 0
  for m in sample:
    out, ref = tmp_path / "r.o", tmp_path / "p.o"
    res = env.compile_module(m, "inlining", env.DefaultPolicy(), llvm_version=version,
                             output_path=str(out))
    assert res.ok, f"{m.name}: {res.reason}"
    decisions += sum(len(t.actions) for t in res.trajectories)  # a module may have none
    env.plain_compile(m, "inlining", llvm_version=version, output_path=str(ref))
    assert filecmp.cmp(out, ref, shallow=False), m.name
  assert decisions > 0, "the sample replayed no inlining decision"
