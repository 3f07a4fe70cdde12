"""Policies for the environment: anything with `act(observation: dict) -> action`, and
optionally `enter_function(name)`, which the compile loop calls when the compiler starts
a function (streams that name functions: regalloc).

The observation dict maps the compiler's feature names to numpy arrays (shaped as in the
problem's feature specs); for inlining it also holds `inlining_default`, the compiler's
own decision (version quirks already resolved).
"""
import zlib

import numpy as np

from mlgo.problems import get_problem


def _problem_of(obs: dict) -> str:
  if "inlining_default" in obs:
    return "inlining"
  if "mask" in obs:
    return "regalloc_eviction"
  if "li_size" in obs:
    return "regalloc_priority"
  raise ValueError(f"cannot tell the problem from features {sorted(obs)[:5]}...")


class CompilerDefault:
  """Not a policy on the channel: compile_module runs the compiler without the
  interactive channel, so its own default heuristic decides (the reference compile).
  For problems whose channel sends the default's decision (inlining) DefaultPolicy
  reproduces it exactly; for the others (regalloc) only this is the true default."""

  def act(self, observation: dict):
    raise RuntimeError("CompilerDefault never answers on the channel")


def reference_policy(problem):
  """The policy whose compile is the default's score for `problem`."""
  return DefaultPolicy(problem) if get_problem(problem).default_on_channel else CompilerDefault()


class DefaultPolicy:
  """The compiler's default decision (inlining) or the documented default-equivalent
  choice (eviction, priority; see mlgo.problems.regalloc)."""

  def __init__(self, problem=None):
    self._default = get_problem(problem).default_action if problem else None

  def act(self, observation: dict):
    if self._default is None:
      self._default = get_problem(_problem_of(observation)).default_action
    return self._default(observation)


class ThresholdShift:
  """The inliner's default with its threshold moved for every call site: the -Oz default
  inlines almost exactly when cost_estimate < threshold (99.9% agreement on the default
  corpus' trace), so ThresholdShift(delta) inlines when cost_estimate < threshold +
  delta. The global knob a learned per-call-site policy must beat."""

  def __init__(self, delta: int):
    self.delta = int(delta)

  def act(self, observation):
    c = int(observation["cost_estimate"].reshape(-1)[0])
    t = int(observation["threshold"].reshape(-1)[0])
    return np.int64(1 if c < t + self.delta else 0)


class LogitShift:
  """A learned categorical policy (a policy dir's spec and weights) with `shift` added to
  the logit of `action`: its own global knob (for inlining, shift > 0 inlines more).
  Greedy. A policy that defers to the compiler still does, where it would unshifted: the
  knob moves only the decisions the network makes, so shift 0 is the policy itself.
  Picklable for worker pools."""

  def __init__(self, spec: dict, weights: dict, shift: float, action: int = 1):
    self.spec, self.weights = spec, weights
    self.shift, self.action = float(shift), int(action)
    self._policy = None

  def __getstate__(self):
    return dict(self.__dict__, _policy=None)

  def act(self, observation):
    if self._policy is None:
      from mlgo.policy import policy_io  # pylint: disable=import-outside-toplevel
      self._policy = policy_io.Policy(self.spec, self.weights, greedy=True)
    answer, params = self._policy.deferral(observation)
    if answer is not None:
      return np.int64(answer)
    if "logits" not in params:
      raise ValueError(f"LogitShift needs a categorical policy, not "
                       f"{self.spec['architecture']['type']}")
    logits = np.array(params["logits"], np.float64).reshape(-1)
    logits[self.action] += self.shift
    return np.int64(np.argmax(logits))


class PrefixFlip:
  """Replays `prefix` (the binary actions of an earlier compile of the same module, in
  order) before decision `at`, takes the other action at `at`, and lets `then` decide
  every later one. The compile is deterministic, so the replayed prefix meets the same
  decisions again; what follows the flip may differ, and `then` handles it."""

  def __init__(self, prefix, at: int, then):
    self.prefix = [int(a) for a in prefix[:at + 1]]
    self.at, self.then, self.i = int(at), then, 0

  def act(self, observation):
    i, self.i = self.i, self.i + 1
    if i < self.at:
      return np.int64(self.prefix[i])
    if i == self.at:
      return np.int64(1 - self.prefix[i])
    return self.then.act(observation)


class FunctionRouter:
  """Each function's decisions from one of several policies: `route` maps a function
  name to an index into `policies`; a function it does not name gets policies[0]. The
  compile loop calls enter_function(name) when the compiler starts a function (regalloc
  streams name each function in a context event). Greedy allocation of one function
  does not depend on another's, so with deterministic policies a function gets exactly
  the allocation its policy would give it alone: what a guard choosing among several
  policies needs (evaluation.measured_guard)."""

  def __init__(self, policies, route: dict):
    if not policies:
      raise ValueError("FunctionRouter needs at least one policy")
    bad = {f: k for f, k in route.items() if not 0 <= int(k) < len(policies)}
    if bad:
      raise ValueError(f"FunctionRouter: route names policies that do not exist: "
                       f"{dict(list(bad.items())[:3])} (have {len(policies)})")
    self.policies, self.route = list(policies), {f: int(k) for f, k in route.items()}
    self.current = self.policies[0]

  def enter_function(self, name: str):
    self.current = self.policies[self.route.get(name, 0)]
    enter = getattr(self.current, "enter_function", None)
    if enter is not None:
      enter(name)

  def act(self, observation: dict):
    return self.current.act(observation)


class PerFunctionSample:
  """Samples `policy` (a sampling policy_io.Policy) with a generator seeded by (seed,
  the function's name) at the start of every function, so a function's sampled
  allocation does not depend on which other functions were sampled before it: the same
  in a plain compile and in a routed one (FunctionRouter), as a selection among
  candidates needs."""

  def __init__(self, policy, seed: int):
    if getattr(policy, "greedy_mode", False):
      raise ValueError("PerFunctionSample needs a sampling policy (greedy=False)")
    self.policy, self.seed = policy, int(seed)

  def enter_function(self, name: str):
    self.policy.rng = np.random.default_rng([self.seed, zlib.crc32(name.encode())])

  def act(self, observation: dict):
    return self.policy.act(observation)


class RandomPolicy:
  """Uniformly random valid decisions (seeded), by the problem's own rule
  (Problem.random_action): inline or not; a masked-valid column; a priority uniform in
  [0, 2 * li_size + 1]."""

  def __init__(self, seed: int = 0, problem=None):
    self.rng = np.random.default_rng(seed)
    self._problem = get_problem(problem) if problem else None

  def act(self, observation: dict):
    if self._problem is None:
      self._problem = get_problem(_problem_of(observation))
    return self._problem.random_action(observation, self.rng)


class ShadowPolicy:
  """Evaluates `policy` on every observation but answers the default decision: the
  compiler does exactly the default work, so timing it isolates the overhead of the
  channel plus the policy's computation (bench_env)."""

  def __init__(self, policy, problem):
    self.policy = policy
    self.default = DefaultPolicy(problem)

  def act(self, observation: dict):
    self.policy.act(observation)
    return self.default.act(observation)


class MLPPolicy:
  """A small numpy MLP with random weights (for overhead benchmarks and tests).

  Inlining: features -> log1p-squashed vector -> hidden layers -> logit; inline if > 0.
  Eviction: a shared per-column scorer over the [33] columns (features transposed to
  [33, F]), the best-scoring column (invalid columns are left to the environment's
  mask enforcement, so this also exercises corrections). Priority: a scalar output.
  Buffers are preallocated; act() allocates only numpy temporaries.
  """

  def __init__(self, problem, hidden=(64, 64), seed: int = 0):
    self.problem = get_problem(problem)
    rng = np.random.default_rng(seed)
    self.names = self.problem.feature_names
    act = self.problem.action
    self.integer = np.issubdtype(act.dtype, np.integer)
    n_act = int(act.high - act.low + 1) if self.integer else 1
    # Columnar problems (eviction): features of shape [1, number of actions], scored per
    # column; the scalar ones are broadcast to every column.
    self.col_names = [f.name for f in self.problem.features if f.shape == (1, n_act)]
    self.columnar = self.integer and n_act > 2 and bool(self.col_names)
    if self.columnar:
      self.scalar_names = [n for n in self.names if n not in self.col_names]
      n_in = len(self.col_names) + len(self.scalar_names)
      self.x = np.zeros((n_act, n_in), np.float32)
    else:
      n_in = len(self.names)
      self.x = np.zeros((n_in,), np.float32)
    sizes = (n_in,) + tuple(hidden) + (1,)
    self.layers = [(rng.standard_normal((a, b)).astype(np.float32) / np.sqrt(a),
                    np.zeros((b,), np.float32)) for a, b in zip(sizes[:-1], sizes[1:])]

  def _forward(self, x):
    for i, (w, b) in enumerate(self.layers):
      x = x @ w + b
      if i + 1 < len(self.layers):
        np.maximum(x, 0.0, out=x)
    return x

  def act(self, observation: dict):
    act = self.problem.action
    if self.columnar:
      x = self.x
      k = len(self.col_names)
      x[:, :k] = np.concatenate([observation[n] for n in self.col_names]).T
      for i, n in enumerate(self.scalar_names):
        x[:, k + i] = np.asarray(observation[n]).reshape(-1)[0]
      scores = self._forward(x)[:, 0]
      return act.dtype.type(int(act.low) + int(np.argmax(scores)))
    x = np.concatenate([np.asarray(observation[n]).reshape(-1) for n in self.names]
                       ).astype(np.float32)
    np.log1p(np.abs(x), out=x)
    out = float(self._forward(x)[0])
    if self.integer:
      return act.dtype.type(act.high if out > 0.0 else act.low)
    return act.dtype.type(abs(out) * 1000.0)
