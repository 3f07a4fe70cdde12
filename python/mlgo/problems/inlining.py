"""Inlining for size: clang at the corpus' -O level (normally -Oz), one decision per call site.

Channel: `-mllvm -enable-ml-inliner=release -mllvm -inliner-interactive-channel-base=BASE
-mllvm -inliner-interactive-include-default`; for DefaultPolicy also
`-mllvm -ml-advisor-size-increase-threshold=1000000` (see NO_SIZE_CAP). Per call site the compiler sends 38 int64
features (shape [1]) plus `inlining_default`, and reads one int64: 1 = inline, 0 = don't.

Default decision, by version (verified with clang-22.1 and clang-19.1 on this machine):
  - LLVM 22: `inlining_default` carries the default heuristic's decision.
  - LLVM 19: `inlining_default` is always 0; the default decision arrives in the
    `callee_basic_block_count` slot, whose real value is therefore lost. We take the
    default from that slot and set the policy-visible `callee_basic_block_count` to 0, so
    the policy never sees the default decision disguised as a feature.
Answering the default for every call site reproduces the plain compile byte for byte
on both versions (python/tests/env).

Reward: the `.text` size in bytes of the object file (sum of all SHT_PROGBITS sections
named .text or .text.*, read from the ELF section headers by mlgo.util.toolchain.text_size).
Lower is better; reported as {"text_size": int}.
"""
import numpy as np

from mlgo.policy import architectures
from mlgo.problems import ir2vec
from mlgo.problems.base import ActionSpec, Problem, spec
from mlgo.util import toolchain

FEATURE_NAMES = [
    "sroa_savings", "sroa_losses", "load_elimination", "call_penalty",
    "call_argument_setup", "load_relative_intrinsic", "lowered_call_arg_setup",
    "indirect_call_penalty", "jump_table_penalty", "case_cluster_penalty",
    "switch_default_dest_penalty", "switch_penalty", "unsimplified_common_instructions",
    "num_loops", "dead_blocks", "simplified_instructions", "constant_args",
    "constant_offset_ptr_args", "callsite_cost", "cold_cc_penalty",
    "last_call_to_static_bonus", "is_multiple_blocks", "nested_inlines",
    "nested_inline_cost_estimate", "threshold", "callee_basic_block_count",
    "callsite_height", "node_count", "nr_ctant_params", "cost_estimate", "edge_count",
    "caller_users", "caller_conditionally_executed_blocks", "caller_basic_block_count",
    "callee_conditionally_executed_blocks", "callee_users", "is_callee_avail_external",
    "is_caller_avail_external",
]
DEFAULT_FEATURE = "inlining_default"
# The ML advisor stops all inlining once the module's estimated native size has grown by
# -ml-advisor-size-increase-threshold (default 2.0); the default inliner has no such cap,
# so with it default replay diverges on modules that legitimately grow more than 2x
# (e.g. mbedtls psa_constant_names.c). The environment lifts the cap for DefaultPolicy
# (so default replay reproduces plain -Oz) and keeps LLVM's cap for every other policy:
# without it an untrained policy that inlines everything made compiles ~20x slower.
NO_SIZE_CAP = 1000000
# LLVM versions whose interactive inliner puts the default decision into this slot.
_DEFAULT_IN_SLOT = {19: "callee_basic_block_count"}
_ZERO = np.zeros((1,), np.int64)
_ONE = np.ones((1,), np.int64)
_ZERO.flags.writeable = False
_ONE.flags.writeable = False
_ACTIONS = (np.int64(0), np.int64(1))


def default_slot(llvm_version: int) -> str:
  """Name of the feature that carries the default decision for `llvm_version`."""
  if llvm_version <= 19:
    return _DEFAULT_IN_SLOT[19]
  return DEFAULT_FEATURE


def prepare(obs: dict, llvm_version: int):
  """Raw features -> (policy features, default decision)."""
  if llvm_version <= 19:
    slot = _DEFAULT_IN_SLOT[19]
    default = int(obs[slot][0] != 0)
    obs[slot] = _ZERO
  else:
    default = int(obs[DEFAULT_FEATURE][0] != 0)
  obs[DEFAULT_FEATURE] = _ONE if default else _ZERO
  return obs, default


def default_action(obs: dict) -> np.int64:
  return _ACTIONS[int(obs[DEFAULT_FEATURE][0] != 0)]


def validate(action, obs):
  if isinstance(action, np.int64) and (action == 0 or action == 1):
    return action, False  # the fast path: a well-formed answer
  a = int(np.asarray(action).reshape(-1)[0])
  if a in (0, 1):
    return _ACTIONS[a], False
  return np.int64(1 if a > 0 else 0), True


EMBEDDING_FEATURES = ("callee_embedding", "caller_embedding")
# Sent by the context plugin (cc/inline_plugin/context_features.h), computed fresh at each
# call site: whether the callee goes away once unused (local or linkonce linkage), whether
# something other than a call keeps it, its uses now, its calls in this caller, and how
# many of its call sites were inlined so far. Stock clang says none of this; explain_growth
# found the largest growths on unseen code where it matters (the 85th inlined copy of a
# callee that "has 2 users").
CONTEXT_FEATURES = ("callee_discardable", "callee_address_taken", "callee_uses",
                    "callee_sites_in_caller", "callee_times_inlined")


def context_plugin() -> str:
  from mlgo.util import compiler_plugins  # pylint: disable=import-outside-toplevel
  return compiler_plugins.plugin_path(compiler_plugins.INLINE_CONTEXT, 22)


def reward(outputs: dict) -> dict:
  return {"text_size": toolchain.text_size(outputs["object"])}


def other_decision(obs, action):
  """A rollout probe's alternative: the other answer (inline <-> do not)."""
  return np.int64(1 - int(np.asarray(action).reshape(-1)[0]))


def text_size_score(reward_dict):
  return {"": reward_dict["text_size"]}


def exploration_prob(features: dict, eps: float, tau: float):
  """The default inlines iff cost_estimate < threshold. Flipping a call site far from
  that boundary (inlining a callee that costs hundreds over the threshold) nearly always
  grows the code and drowns the module's reward in noise; exploring close to the
  boundary is where a different decision can pay off."""
  c = np.asarray(features["cost_estimate"], np.float64).reshape(-1)
  t = np.asarray(features["threshold"], np.float64).reshape(-1)
  return eps * np.exp(-np.abs(c - t) / max(tau, 1e-6))


def architecture(features, norms, hidden) -> dict:
  del features, norms
  return {"type": architectures.MlpCategorical.TYPE, "hidden": [int(h) for h in hidden],
          "num_actions": 2, "output_name": "inlining_decision", "output_dtype": "int64"}


def problem_name(with_ir2vec: bool = False, with_context: bool = False) -> str:
  return "inlining" + ("_ir2vec" if with_ir2vec else "") + ("_ctx" if with_context else "")


def make_problem(with_ir2vec: bool = False, with_context: bool = False) -> Problem:
  """with_ir2vec: the variant "inlining_ir2vec" (clang-22 only), whose policy also sees the
  callee's and the caller's instruction mix (mlgo.problems.ir2vec). with_context: "_ctx"
  variants (clang-22 only) whose policy also sees CONTEXT_FEATURES, sent by the context
  plugin that clang loads for the channel."""
  features = [spec(n, np.int64) for n in FEATURE_NAMES]
  extra_options = ()
  if with_ir2vec:
    features += [spec(n, np.float32, (ir2vec.DIM,)) for n in EMBEDDING_FEATURES]
    extra_options = ir2vec.clang_options(ir2vec.vocabulary_path())
  if with_context:
    features += [spec(n, np.int64) for n in CONTEXT_FEATURES]
  volatile = ("node_count", "edge_count")
  if with_context:
    # Other inlines change them: the callee's uses and copies, the caller's calls.
    volatile += ("callee_uses", "callee_sites_in_caller", "callee_times_inlined")
  return Problem(
      name=problem_name(with_ir2vec, with_context),
      tool="clang",
      features=features,
      action=ActionSpec("inlining_decision", np.dtype(np.int64), (1,), 0, 1),
      reward_description=".text bytes of the object file (lower is better)",
      higher_is_better=False,
      channel_option="-inliner-interactive-channel-base",
      enable_options=("-enable-ml-inliner=release", "-inliner-interactive-include-default",
                      *extra_options),
      default_policy_options=(f"-ml-advisor-size-increase-threshold={NO_SIZE_CAP}",),
      hidden_features=(DEFAULT_FEATURE,),
      prepare=prepare,
      default_action=default_action,
      validate=validate,
      default_description="the compiler's own decision (inlining_default; on LLVM 19 the "
                          "callee_basic_block_count slot)",
      reward_fn=reward,
      key="module",
      score_fn=text_size_score,
      variant_of="inlining" if (with_ir2vec or with_context) else None,
      reward_delta=0.01,
      architecture_fn=architecture,
      default_hidden=(64, 64),
      exploration_fn=exploration_prob,
      score_name="text",
      probe_alternative=other_decision,
      # The call graph's size: every inline or deleted function elsewhere changes it.
      probe_volatile=volatile,
      channel_plugin=context_plugin if with_context else None,
  )


PROBLEMS = {
    "inlining": make_problem,
    "inlining_ir2vec": lambda: make_problem(with_ir2vec=True),
    # Call-site context from the context plugin (CONTEXT_FEATURES).
    "inlining_ctx": lambda: make_problem(with_context=True),
    "inlining_ir2vec_ctx": lambda: make_problem(with_ir2vec=True, with_context=True),
}
