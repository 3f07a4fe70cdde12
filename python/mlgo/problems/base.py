"""The `Problem` description shared by all problems."""
import dataclasses
from typing import Any, Callable, Optional, Sequence

import numpy as np

from mlgo.log import FeatureSpec


class ProblemError(ValueError):
  """The compiler sent something the problem description cannot work with."""


@dataclasses.dataclass(frozen=True)
class ActionSpec:
  name: str          # the advice tensor's name in the compiler's header
  dtype: np.dtype
  shape: tuple
  low: float         # inclusive bounds (for int actions: the valid index range)
  high: float

  def cast(self, value) -> np.ndarray:
    return np.asarray(value, dtype=self.dtype).reshape(self.shape)


@dataclasses.dataclass
class Problem:
  """One decision problem inside the compiler.

  Hooks (set by the problem's module):
    channel_flags(base, tool)  flags that enable the interactive channel at BASE.{in,out};
                               for clang they are wrapped in -mllvm.
    prepare(obs, version)      turns the compiler's raw feature dict into what the policy
                               sees; returns (features, default_action or None). Handles
                               version quirks (LLVM 19's inliner default).
    default_action(obs)        the decision DefaultPolicy answers for a prepared obs.
    validate(action, obs)      (action, corrected: bool): a valid action for obs.
    reward(workdir_files)      reward dict from the compile's outputs.
  """
  name: str
  tool: str                                # "clang" | "llc"
  features: list                           # list[FeatureSpec] the policy sees
  action: ActionSpec
  reward_description: str
  higher_is_better: bool
  channel_option: str                      # e.g. -inliner-interactive-channel-base
  enable_options: Sequence[str]            # e.g. -enable-ml-inliner=release
  hidden_features: Sequence[str] = ()      # sent by the compiler, not shown to the policy
  default_policy_options: Sequence[str] = ()  # extra options when DefaultPolicy answers
  prepare: Callable[[dict, int], tuple] = None
  default_action: Callable[[dict], Any] = None
  validate: Callable[[Any, dict], tuple] = None
  default_description: str = ""

  @property
  def feature_names(self) -> list[str]:
    return [f.name for f in self.features]

  def channel_flags(self, base: str, default_policy: bool = False) -> list[str]:
    flags = list(self.enable_options)
    if default_policy:
      flags += list(self.default_policy_options)
    flags.append(f"{self.channel_option}={base}")
    if self.tool == "clang":
      return [x for f in flags for x in ("-mllvm", f)]
    return flags

  def describe(self) -> str:
    lines = [f"problem {self.name} ({self.tool})",
             f"  action: {self.action.name} {np.dtype(self.action.dtype).name}"
             f"{list(self.action.shape)} in [{self.action.low}, {self.action.high}]",
             f"  features ({len(self.features)}): " +
             ", ".join(f"{f.name}{list(f.shape)}" for f in self.features),
             f"  default: {self.default_description}",
             f"  reward: {self.reward_description}"]
    return "\n".join(lines)


def spec(name: str, dtype, shape=(1,)) -> FeatureSpec:
  return FeatureSpec(name, np.dtype(dtype), tuple(shape))


def first(x) -> Any:
  """First element of a (1,)- or (1,1)-shaped array, as a Python scalar."""
  return np.asarray(x).reshape(-1)[0].item()
