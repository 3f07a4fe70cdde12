"""A toy fourth problem, the README's worked example of adding one: inlining for size
where the policy sees five of the inliner's features and decides with a 16-unit network.
It reuses LLVM's ML inliner channel and the inlining problem's glue (default decision,
answer check, .text reward, MLP architecture); the rest is said here."""
import numpy as np

from mlgo.problems import inlining
from mlgo.problems.base import ActionSpec, Problem, spec

SEEN = ("cost_estimate", "threshold", "callee_basic_block_count", "callsite_height",
        "caller_users")


def make_problem() -> Problem:
  return Problem(
      name="inline_few",
      tool="clang",
      features=[spec(n, np.int64) for n in SEEN],
      action=ActionSpec("inlining_decision", np.dtype(np.int64), (1,), 0, 1),
      reward_description=".text bytes of the object file (lower is better)",
      higher_is_better=False,
      channel_option="-inliner-interactive-channel-base",
      enable_options=("-enable-ml-inliner=release", "-inliner-interactive-include-default"),
      default_policy_options=(f"-ml-advisor-size-increase-threshold={inlining.NO_SIZE_CAP}",),
      # Sent by clang, read by prepare/default_action, never shown to the policy.
      hidden_features=(inlining.DEFAULT_FEATURE,),
      prepare=inlining.prepare,
      default_action=inlining.default_action,
      validate=inlining.validate,
      default_description="clang's own decision",
      reward_fn=inlining.reward,
      key="module",
      score_fn=inlining.text_size_score,
      architecture_fn=inlining.architecture,   # an MLP over the features, 2 answers
      default_hidden=(16,),
      score_name="text",
  )


PROBLEMS = {"inline_few": make_problem}
