"""The context plugin (cc/inline_plugin/interactive_plugin.cc): clang-22's inline advisor
on the channel with five call-site features stock clang does not send
(problems inlining_ctx, inlining_ir2vec_ctx)."""
import filecmp
import subprocess

import numpy as np

from mlgo import env, problems
from mlgo.problems import inlining
from mlgo.util import compiler_plugins, toolchain

import envtestlib as lib

# Three calls of a static helper, one of an external function, one of a static function
# whose address is also taken. -Oz inlines all five.
SITES = """
static int helper(int x) { return x * 3 + 1; }
int ext(int x) { return x ^ 7; }
static int taken(int x) { return x - 2; }
int (*fp)(int) = taken;
int caller(int a) { return helper(a) + helper(a + 1) + helper(a + 2) + ext(a) + taken(a); }
"""


def _rows(traj):
  return [{k: int(traj.features[k][i, 0]) for k in inlining.CONTEXT_FEATURES}
          for i in range(len(traj))]


def test_context_values_follow_the_module(tmp_path):
  src = tmp_path / "sites.c"
  src.write_text(SITES)
  m = env.module_from_source(str(src), str(tmp_path), opt="Oz")
  res = env.compile_module(m, "inlining_ctx", env.DefaultPolicy(), llvm_version=22)
  assert res.ok, res.reason
  (traj,) = res.trajectories
  np.testing.assert_array_equal(traj.actions, [1, 1, 1, 1, 1])
  names = ("callee_discardable", "callee_address_taken", "callee_uses",
           "callee_sites_in_caller", "callee_times_inlined")
  assert _rows(traj) == [dict(zip(names, v)) for v in [
      (1, 0, 3, 3, 0),   # helper, first of three: nothing inlined yet
      (1, 0, 2, 2, 1),   # one copy made, one use fewer
      (1, 0, 1, 1, 2),
      (0, 0, 1, 1, 0),   # ext: external, it stays whatever we do
      (1, 1, 2, 1, 0),   # taken: local but its address is stored, so it stays too
  ]]
  # LLVM's own callee_users is taken before the inlines and does not move.
  assert traj.features["callee_users"][:3, 0].tolist() == [3, 3, 3]


def test_never_inlining_counts_no_copies(tmp_path):
  src = tmp_path / "sites.c"
  src.write_text(SITES)
  m = env.module_from_source(str(src), str(tmp_path), opt="Oz")

  class Never:
    def act(self, observation):
      del observation
      return np.int64(0)

  res = env.compile_module(m, "inlining_ctx", Never(), llvm_version=22)
  assert res.ok, res.reason
  rows = _rows(res.trajectories[0])
  assert [r["callee_times_inlined"] for r in rows] == [0] * len(rows)
  assert [r["callee_uses"] for r in rows[:3]] == [3, 3, 3]


def test_default_replay_is_the_plain_compile_with_the_same_llvm_features(tmp_path):
  for name in ("calls.c", "catch_rethrow.cpp"):
    m = lib.inlining_module(name, 22)
    replay = tmp_path / f"{name}.ctx.o"
    res = env.compile_module(m, "inlining_ctx", env.DefaultPolicy(), llvm_version=22,
                             output_path=str(replay))
    assert res.ok, res.reason
    plain = tmp_path / f"{name}.plain.o"
    env.plain_compile(m, "inlining", llvm_version=22, output_path=str(plain))
    assert filecmp.cmp(replay, plain, shallow=False), name
    stock = env.compile_module(m, "inlining", env.DefaultPolicy(), llvm_version=22)
    assert res.decisions == stock.decisions > 0
    for f in problems.get_problem("inlining").feature_names:
      np.testing.assert_array_equal(res.trajectories[0].features[f],
                                    stock.trajectories[0].features[f], err_msg=f)


def test_ir2vec_ctx_sends_both_extensions():
  res = env.compile_module(lib.inlining_module("calls.c", 22), "inlining_ir2vec_ctx",
                           env.DefaultPolicy(), llvm_version=22)
  assert res.ok, res.reason
  feats = res.trajectories[0].features
  assert feats["callee_embedding"].shape[1] > 1 and feats["callee_embedding"].any()
  assert (feats["callee_sites_in_caller"] >= 1).all()


def test_plugin_without_a_channel_says_what_is_missing(tmp_path):
  so = compiler_plugins.plugin_path(compiler_plugins.INLINE_CONTEXT, 22)
  r = subprocess.run([toolchain.toolchain(22).clang, "-Oz", "-c", lib.program("calls.c"),
                      f"-fpass-plugin={so}", "-o", str(tmp_path / "x.o")],
                     capture_output=True, text=True, timeout=120)
  assert r.returncode != 0
  assert "mlgo context plugin" in r.stderr
  assert "-inliner-interactive-channel-base" in r.stderr
  assert "Stack dump" not in r.stderr
