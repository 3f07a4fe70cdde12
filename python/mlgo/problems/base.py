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


@dataclasses.dataclass(frozen=True)
class Tracer:
  """How a problem whose channel cannot send the default's decision gets it: a compiler
  plugin (cc/regalloc_trace) keeps the default heuristic in charge and logs, per
  decision, the default's answer (`default_feature`) and, if `policy_feature` is set,
  its reading of the answer we sent (checked against what we sent)."""
  log_option: str                 # e.g. -regalloc-evict-trace-log (the plugin's option)
  default_feature: str
  policy_feature: Optional[str] = None
  answer: Callable[[dict], Any] = None   # what we answer while tracing (ignored by llc)


@dataclasses.dataclass
class Problem:
  """One decision problem inside the compiler: everything the shared environment,
  trainer, evaluator and exporter need to know about it, and nothing they share.

  Compiling (mlgo.env):
    channel_flags(base, default_policy)  flags that enable the interactive channel at
                               BASE.{in,out} (for clang wrapped in -mllvm).
    prepare(obs, version)      turns the compiler's raw feature dict into what the policy
                               sees; returns (features, default_action or None). Handles
                               version quirks (LLVM 19's inliner default).
    default_action(obs)        the decision DefaultPolicy answers for a prepared obs.
    validate(action, obs)      (action, corrected: bool): a valid action for obs.
    reward_fn(outputs)         the reward dict of a finished compile, from its object
                               file and (remarks_filter set) its optimization remarks;
                               reward_flags are added to every compile for it.
    reward_needs_object        False (rewards read from the remarks alone): llc writes no
                               object (-filetype=null) where nothing else asks for one;
                               the allocation and its remarks are the same, ~6-9% less
                               llc time.
    default_on_channel         True: DefaultPolicy on the channel is the compiler's own
                               default (inlining); False: it is only default-equivalent,
                               so the default's scores come from a compile without the
                               channel and its decisions from `tracer` (regalloc).
  Training and evaluation (mlgo.training, mlgo.evaluation):
    key                        "module" or "function": what one score belongs to.
    scores(module_name, reward) {key: score}, lower is better.
    trajectory_key(module, t)  the key a trajectory's decisions are credited with.
    reward_value(score, base)  1 - (score + d) / (base + d), clipped if reward_clip.
    architecture(features, norms, hidden)  the policy network config (policy.json).
    log_scale_features         features whose values span many decades near 0 (eviction's
                               frequencies and weights divided by the function's largest):
                               with log_scale (bc.train_bc, PipelineConfig.log_scale) they
                               are encoded with log instead of slog (mlgo.policy.normalization).
    exploration_prob(features, eps, tau)   where behavioral cloning leaves probability
                               on non-default actions (None: uniform label smoothing).
    probe_alternative(obs, action)  the action a rollout probe (mlgo.training.rollouts)
                               tries instead of the policy's at one decision, or None
                               where it tries none; problems without it cannot be probed.
    probe_volatile             features that any decision elsewhere in the module changes
                               (module-wide counts); several flips in one compile find
                               their call sites again without them (training.multi_flip).
    channel_plugin             () -> path of a clang plugin that owns the channel and
                               sends more features than stock clang (inlining_ctx).
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
  reward_fn: Callable[[dict], dict] = None   # {"object", "remarks", "contexts"} -> reward
  remarks_filter: Optional[str] = None       # -pass-remarks-filter the reward needs
  reward_name: str = "default"              # which reward reward_fn computes
  reward_tag: Optional[Callable[[], str]] = None  # what else the reward depends on (e.g.
                                             # a model file's hash), for caches of scores
  reward_flags: Sequence[str] = ()           # other compiler flags the reward needs (every
                                             # compile, with or without the channel)
  reward_needs_object: bool = True           # False: the reward reads no object file
  default_on_channel: bool = True
  tracer: Optional[Tracer] = None
  key: str = "module"
  score_fn: Callable[[dict], dict] = None          # reward dict -> {sub-key or "": score}
  missing_score: Optional[float] = None           # score of a key absent from a compile
  reward_delta: float = 0.01
  reward_clip: Optional[float] = None
  architecture_fn: Callable[[list, dict, Sequence[int]], dict] = None
  log_scale_features: Sequence[str] = ()
  default_hidden: Sequence[int] = (64, 64)
  exploration_fn: Optional[Callable] = None
  score_name: str = "score"                       # "text" (bytes) or "cost" in reports
  random_fn: Optional[Callable] = None            # (obs, rng) -> a random valid action
  corpus_opt: str = "Oz"                          # the default corpus' -O level
  variant_of: Optional[str] = None                # same decisions; more features or
                                                  # another reward
  probe_alternative: Optional[Callable[[dict, Any], Any]] = None
  probe_volatile: Sequence[str] = ()
  # A clang pass plugin that owns the channel (it sends features stock clang does not):
  # () -> its path, loaded with -fpass-plugin whenever the channel is open.
  channel_plugin: Optional[Callable[[], str]] = None

  @property
  def feature_names(self) -> list[str]:
    return [f.name for f in self.features]

  def channel_flags(self, base: str, default_policy: bool = False) -> list[str]:
    flags = list(self.enable_options)
    if default_policy:
      flags += list(self.default_policy_options)
    flags.append(f"{self.channel_option}={base}")
    if self.tool == "clang":
      plugin = [f"-fpass-plugin={self.channel_plugin()}"] if self.channel_plugin else []
      return plugin + [x for f in flags for x in ("-mllvm", f)]
    return flags

  def scores(self, module_name: str, reward: dict) -> dict:
    """{key: score} of one finished compile; keys are module names or
    "module::function"."""
    sub = self.score_fn(reward)
    if self.key == "module":
      return {module_name: float(v) for v in sub.values()}
    return {f"{module_name}::{fn}": float(v) for fn, v in sub.items()}

  def module_of(self, key: str) -> str:
    """The module a key (from `scores`) belongs to."""
    return key if self.key == "module" else key.split("::", 1)[0]

  def trajectory_key(self, module_name: str, trajectory) -> str:
    if self.key == "module":
      return module_name
    return f"{module_name}::{trajectory.context}"

  def reward_value(self, score: float, baseline: float) -> float:
    d = self.reward_delta
    r = 1.0 - (score + d) / (baseline + d)
    if self.reward_clip is not None:
      r = min(max(r, -self.reward_clip), self.reward_clip)
    return r

  def architecture(self, features: list, norms: dict, hidden=None, options=None) -> dict:
    """The policy network config for `features` (json specs) with normalization
    `norms` (name -> FeatureNorm); `options` are the architecture's own keyword options
    (e.g. eviction's cost_mask), from PipelineConfig.architecture_options."""
    try:
      return self.architecture_fn(features, norms, tuple(hidden or self.default_hidden),
                                  **(options or {}))
    except TypeError as e:
      raise ValueError(f"{self.name}: architecture options {sorted(options or {})} not "
                       f"accepted ({e})") from e

  def exploration_prob(self, features: dict, eps: float, tau: float):
    if self.exploration_fn is None:
      return None
    return self.exploration_fn(features, eps, tau)

  def random_action(self, obs: dict, rng):
    """A uniformly random valid action (the problem's own rule, else uniform in the
    action's bounds)."""
    if self.random_fn is not None:
      return self.random_fn(obs, rng)
    if np.issubdtype(self.action.dtype, np.integer):
      return self.action.cast(rng.integers(int(self.action.low), int(self.action.high) + 1))
    return self.action.cast(rng.uniform(self.action.low, self.action.high))

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
