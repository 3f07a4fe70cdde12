"""PPO training with the policy in the compiler loop (tf-agents PPOClipAgent).

One iteration: sample modules of the training split, compile them in parallel with the
current stochastic policy (numpy sampler built from the exported weights, never TF per
decision), score each module (or function) against a per-key moving-average baseline,
credit every decision of a trajectory with its key's reward (plus, with a credit model,
its own estimated share: mlgo.credit), then run PPO epochs on the decisions
(mlgo.training.learner: the networks, Adam and the tf-agents update). Every iteration
writes a policy dir and an atomic checkpoint (networks, optimizer, baselines, iteration,
RNG state), so killing the trainer loses at most the iteration in flight; running the
same command again resumes.

Problem-specific parts come from the problem description (mlgo.problems: keys, scores,
reward, architecture) and the architecture's network (mlgo.training.networks); this
module is the same for inlining and the regalloc problems. llc-only problems train on
the prepared corpus (mlgo.env.prepared: each module optimized once).
"""
import contextlib
import json
import os
import pathlib
import shutil
import sys
import tempfile
import time

import gin
import numpy as np

from mlgo import credit as credit_lib
from mlgo import problems as problems_lib
from mlgo.env import prepared, work
from mlgo.training import bc, dataset, experience, selection
from mlgo.training import learner as learner_lib
from mlgo.policy import policy_io
from mlgo.util.progress import Progress
from mlgo.workers import make_pool
from mlgo.util.files import write_json_atomic

STATE_VERSION = 1




@gin.configurable
class PPOConfig:
  """Hyperparameters (set in configs/*.gin or with --gin_bindings).

  samples_per_module: compiles of each sampled module per iteration (different seeds).
  baseline: "moving_average" (per key, of the policy's own scores, initialized with the
    default's score; the anchor's way) or "group" (leave-one-out mean of the other
    samples of the same module in this iteration; needs samples_per_module >= 2, falls
    back to the moving average for keys with a single sample).
  decision_weighting: "decision" (every decision weighs 1), "module" (every module's
    decisions together weigh 1) or "sqrt" (1/sqrt(decisions of the module)).
  skip_decisionless: do not sample modules known to have no decisions: True, known from
    the default trace or any PPO compile so far (the pool shrinks as compiles find such
    modules); "trace", known from the default trace only (the pool stays as it starts, as
    the pre-merge regalloc trainer's did); False, sample every training module.
  max_module_decisions: if > 0, do not sample modules known to have more decisions
    (one module-level reward spread over tens of thousands of decisions carries almost
    no signal per decision, and such modules take minutes to compile).
  max_module_bytes: if > 0, training modules whose bitcode file is bigger are neither
    sampled nor validated, nor traced by the pipeline (they are still evaluated). An
    iteration waits for its slowest compile: on the default corpus a 9 MB module takes
    ~20 s of llc -O2 while the median (12 KB) takes 0.06 s, so the few giants set the
    wall time of the iterations that draw them while the other worker idles. Known
    before any compile, so the pool and the validation set are the same for every run
    with the same corpus and seed.
  validate_every: every N iterations (0: never) compile `validation_modules` fixed
    training modules with the greedy policy; the best greedy total so far is kept in
    <output>/best_policy (the sampled policy's size says little about the greedy one).
  module_sampling: "uniform", or "sqrt_score" (probability ~ sqrt of the module's
    default score, so modules that weigh more in the total are seen more often).
  hidden: layer sizes; None takes the problem's default.
  score_weighting_power: each decision of a key weighs (default score + d) ** power
    (then normalized to mean 1): 0 treats all keys alike (the reward is relative),
    0.5 leans toward the keys that dominate the total (hot functions for regalloc).
  max_decisions_per_module / max_decisions_per_iteration: if > 0, a seeded uniform
    subsample of the decisions of each compile / of the whole batch is trained on.
  batch_advantage_normalization: standardize the rewards over the whole batch before
    tf-agents sees them (else tf-agents standardizes per minibatch and leaves out
    decisions whose reward is exactly 0).
  validation_metric: "total" (total score change of the validation modules),
    "module_mean" (mean over modules of (policy + 1) / (default + 1) - 1: corpus totals
    can be one hot function, e.g. an interpreter loop holding 90% of a sample's cost),
    "package_mean" (mean of the packages' total changes: each package weighs the same) or
    "key_geomean" (geomean over keys, e.g. functions, of (policy + 1) / (default + 1)).
  validation_regression_weight: points added to the validation figure per percent of
    validation modules more than 1% worse than the default (0: not counted).
  regression_penalty: a key (module or function) more than 1% worse than the default
    loses this times its excess over 1.01 x default from its reward (0: none).
  credit / credit_model / credit_weight: per-decision credit (mlgo.credit; "" = none):
    each decision's reward also gets credit_weight * -(its estimated score change) /
    (the key's default score), e.g. "ir2native" with an `ir2native train` model dir, or
    "function_size" (measured per-function sizes; needs samples_per_module >= 2).
  module_reward_weight: weight of the key's shared reward in each decision's reward
    (1: the usual; 0 with a credit: each decision gets its credit alone).
  validation_packages: if > 0, that many whole packages of the training split (a seeded
    choice; or the ones named in validation_package_names) are never sampled by PPO and
    the validation modules come from them: the kept policy is the one that does best on
    packages it never trained on, as new code would meet it.
  validation_hot_modules / validation_hot_limit: if both > 0, a validation that would be
    kept also compiles the K training modules (of the validation pool) with the largest
    default cost, and the iteration is not kept if one of them is more than `limit`
    times its default (mlgo.training.selection: a mean over many modules hides one hot
    module blowing up).
  """

  def __init__(self, modules_per_iteration: int = 32, num_iterations: int = 100,
               num_epochs: int = 4, minibatch_rows: int = 64, sequence_length: int = 16,
               learning_rate: float = 3e-4, entropy_regularization: float = 0.003,
               importance_ratio_clipping: float = 0.2, use_value_network: bool = False,
               value_pred_loss_coef: float = 0.5, gradient_clipping: float | None = 1.0,
               baseline_momentum: float = 0.8, decision_weighting: str = "decision",
               hidden=None, compile_timeout: float = 300.0,
               iteration_timeout: float | None = 1800.0, jobs: int = 2, pool: str | None = None,
               trace_modules: int = 200, seed: int = 0, keep_policies: int = 1000000,
               save_saved_model: bool = True, samples_per_module: int = 1,
               baseline: str = "moving_average", skip_decisionless: bool | str = True,
               max_module_decisions: int = 0, max_module_bytes: int = 0,
               module_sampling: str = "uniform",
               validate_every: int = 0, validation_modules: int = 48,
               score_weighting_power: float = 0.0, max_decisions_per_module: int = 0,
               max_decisions_per_iteration: int = 0, validation_metric: str = "total",
               validation_regression_weight: float = 0.0, regression_penalty: float = 0.0,
               trace_max_decisions_per_module: int = 0,
               batch_advantage_normalization: bool = False, credit: str = "",
               credit_model: str = "", credit_weight: float = 1.0,
               module_reward_weight: float = 1.0, validation_packages: int = 0,
               validation_package_names=(), validation_hot_modules: int = 0,
               validation_hot_limit: float = 0.0):
    self.__dict__.update({k: v for k, v in locals().items() if k != "self"})

  def to_json(self):
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


class Trainer:

  def __init__(self, corpus_dir, output, problem_name: str = "inlining",
               warmstart=None, trace=None, config: PPOConfig | None = None,
               stream=sys.stderr):
    self.cfg = config or PPOConfig()
    self.stream = stream
    self.output = pathlib.Path(output)
    self.output.mkdir(parents=True, exist_ok=True)
    self.problem = problems_lib.get_problem(problem_name)
    self.corpus = work.corpus_for(corpus_dir, self.problem, jobs=self.cfg.jobs,
                                       stream=stream)
    self.problem_name = problem_name
    # Built before any compile: a bad credit setting fails here, naming what is wrong.
    self.annotator = credit_lib.make_annotator(self.cfg.credit, self.cfg.credit_model,
                                               self.problem)
    if self.cfg.credit == "function_size" and self.cfg.samples_per_module < 2:
      raise ValueError("PPOConfig.credit='function_size' compares the compiles of one "
                       "module in an iteration: set PPOConfig.samples_per_module >= 2")
    self.train_modules = self.corpus.split("train") or list(self.corpus.modules)
    if not self.train_modules:
      raise ValueError(f"{corpus_dir}: corpus has no modules")
    # Packages kept for validation only (none by default: validation samples training modules).
    self.train_modules, self.validation_pool, self.validation_package_list = \
        selection.hold_out_packages(self.train_modules, self.cfg, corpus_dir)
    if self.validation_package_list:
      print(f"validation packages (never sampled for training): "
            f"{', '.join(self.validation_package_list)} ({len(self.validation_pool)} modules; "
            f"{len(self.train_modules)} modules left to train on)", file=stream)
    self.ckpt_dir = self.output / "checkpoint"
    self._recover_checkpoint_dir()
    self.state = self._load_state()
    if self.state is None:
      self.state = self._fresh_state(warmstart, trace)
    self._trim_log(self.state["iteration"])
    self.spec = self.state["spec"]
    self._build_agent()
    if (self.ckpt_dir / "tf").exists():
      import tensorflow as tf  # pylint: disable=import-outside-toplevel
      self.checkpoint.read(tf.train.latest_checkpoint(str(self.ckpt_dir / "tf"))
                           ).assert_existing_objects_matched()
      print(f"resumed from {self.ckpt_dir} at iteration {self.state['iteration']}",
            file=stream)
    elif self.state.get("initial_weights"):
      self.learner.set_weights(self._initial_weights())
    self.rng = np.random.default_rng()
    self.rng.bit_generator.state = self.state["rng"]
    self._workers = None   # the compile workers, started by the first collect

  # --- state -------------------------------------------------------------------
  def _recover_checkpoint_dir(self):
    # A kill between the two renames of a checkpoint swap leaves only ".old".
    old = self.ckpt_dir.with_name("checkpoint.old")
    if not self.ckpt_dir.exists() and old.exists():
      os.rename(old, self.ckpt_dir)
    # A kill while a checkpoint or the latest policy was being written leaves its temp
    # dir; only this trainer writes them, and the half-written copy is worth nothing.
    for pattern in ("checkpoint.tmp*", "policy.tmp*"):
      for stale in self.output.glob(pattern):
        shutil.rmtree(stale, ignore_errors=True)

  def _trim_log(self, iteration: int):
    """Drop log.jsonl records of iterations after `iteration` (the checkpoint's): they
    belong to an iteration whose checkpoint a kill cut off, and the resume redoes it."""
    p = self.output / "log.jsonl"
    if not p.exists():
      return
    lines = p.read_text().splitlines(keepends=True)
    kept = []
    for n, line in enumerate(lines, 1):
      if not line.strip():
        continue
      try:
        rec = json.loads(line)
      except json.JSONDecodeError:
        if n == len(lines):   # the kill cut the last record short
          break
        raise ValueError(f"{p}:{n}: not a JSON record") from None
      if rec.get("iteration", 0) <= iteration:
        kept.append(line if line.endswith("\n") else line + "\n")
    if len(kept) != len(lines):
      tmp = p.with_name(p.name + ".tmp")
      tmp.write_text("".join(kept))
      os.replace(tmp, p)

  def _load_state(self):
    p = self.ckpt_dir / "state.json"
    if not p.exists():
      return None
    with open(p) as f:
      st = json.load(f)
    if st.get("version") != STATE_VERSION or st.get("problem") != self.problem_name:
      raise ValueError(f"{p}: checkpoint is for problem {st.get('problem')!r} / version "
                       f"{st.get('version')}; use another --output to start afresh")
    return st

  def _fresh_state(self, warmstart, trace):
    default_scores, decisions = {}, {}
    default_modules = set()
    # A prepared corpus knows every module's reference scores, under the static remarks
    # reward it was prepared with; another reward gets them from the trace and validation.
    same_reward = self.problem.reward_name == prepared.BASELINE_REWARD
    for m in self.train_modules:
      if same_reward and getattr(m, "baseline", None) is not None:
        default_scores.update(self.problem.scores(m.name, {"functions": m.baseline}))
        default_modules.add(m.name)
    if trace:
      ds = dataset.Dataset(trace)
      for name, info in ds.modules.items():
        for k, v in (info.get("scores") or {}).items():
          default_scores[k] = v
        if info.get("ok"):
          decisions[name] = int(info.get("decisions", 1))
    initial_weights = None
    if warmstart:
      pol = policy_io.load_policy(warmstart)
      if not problems_lib.same_decisions(pol.problem, self.problem_name):
        raise ValueError(f"{warmstart}: policy is for {pol.problem}, not {self.problem_name}")
      spec = dict(pol.spec)
      if spec["problem"] != self.problem_name:   # a reward variant: record what it learns
        spec["trained_for"] = self.problem_name
      initial_weights = str(pathlib.Path(warmstart).resolve() / "weights.npz")
    else:
      if not trace:
        trace = self.output / "trace"
        print(f"no --warmstart and no --trace: tracing {self.cfg.trace_modules} modules "
              f"with the default policy for normalization and baselines", file=self.stream)
        from mlgo.training import trace as trace_lib  # pylint: disable=import-outside-toplevel
        rate = min(1.0, self.cfg.trace_modules / max(1, len(self.train_modules)))
        trace_lib.generate_default_trace(
            self.corpus, self.problem_name, trace, sampling_rate=rate, jobs=self.cfg.jobs,
            timeout=self.cfg.compile_timeout, seed=self.cfg.seed, pool_kind=self.cfg.pool,
            max_decisions_per_module=self.cfg.trace_max_decisions_per_module,
            stream=self.stream)
        for name, info in dataset.Dataset(trace).modules.items():
          for k, v in (info.get("scores") or {}).items():
            default_scores[k] = v
          if info.get("ok"):
            decisions[name] = int(info.get("decisions", 1))
      ds = dataset.Dataset(trace)
      spec = bc.spec_from_trace(ds, self.problem, self.cfg.hidden, self.cfg.seed)
    return {"version": STATE_VERSION, "problem": self.problem_name, "iteration": 0,
            "spec": spec, "initial_weights": initial_weights,
            "default_scores": default_scores, "baselines": dict(default_scores),
            "default_modules": sorted(default_modules | {
                self.problem.module_of(k) for k in default_scores}),
            "decisions": decisions, "trace_decisions": dict(decisions),
            "rng": np.random.default_rng(self.cfg.seed).bit_generator.state,
            "totals": {"failed": 0, "cancelled": 0, "compiles": 0, "cpu_seconds": 0.0,
                       "wall_seconds": 0.0},
            "config": self.cfg.to_json()}

  def _initial_weights(self):
    with np.load(self.state["initial_weights"]) as z:
      return {k: z[k] for k in z.files}

  # --- agent -------------------------------------------------------------------
  def _build_agent(self):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    self.encoder = policy_io.Policy(self.spec, {})
    self.learner = learner_lib.PPOLearner(self.spec, self.cfg,
                                          self.encoder.normalizer.input_dim)
    self.checkpoint = self.learner.checkpoint
    self.summary = tf.summary.create_file_writer(str(self.output / "tensorboard"))

  # --- one iteration -------------------------------------------------------------
  def current_weights(self):
    return self.learner.weights()

  def collect(self, modules, weights):
    ref = (self.spec, weights, False)
    cfg = self.cfg
    st = self.state
    batch = []
    stats = {"failed": 0, "cancelled": 0, "cpu_seconds": 0.0, "failures": []}
    progress = Progress(f"iteration {st['iteration'] + 1} collect",
                        len(modules) * max(1, cfg.samples_per_module),
                        stream=self.stream)
    deadline = time.monotonic() + cfg.iteration_timeout if cfg.iteration_timeout else None
    have_default = set(st.setdefault("default_modules", []))
    ndec = 0
    # Seeds are drawn in the sampled order; compiles start biggest module first; the
    # batch is put back in the sampled order (position), whatever finished first.
    items = [(m, j, int(self.rng.integers(2**31)))
             for m in modules for j in range(max(1, cfg.samples_per_module))]
    position = {}
    with self._pool_for_a_step() as pool:
      for n in work.largest_first([m for m, _, _ in items]):
        m, j, seed = items[n]
        position[pool.submit(work.compile_one, m, self.problem_name, ref, seed,
                             self.corpus.llvm_version, cfg.compile_timeout,
                             j == 0 and m.name not in have_default, self.annotator)] = n
      for r in pool.results(deadline):
        module = r.item[0]
        stats["cpu_seconds"] += r.seconds
        if r.cancelled:
          stats["cancelled"] += 1
          progress.update(failed=1, node=r.node)
          continue
        if not r.ok:
          stats["failed"] += 1
          stats["failures"].append((module.name, r.error.strip().splitlines()[-1][:200]))
          progress.update(failed=1, node=r.node)
          continue
        result, default_result = r.value
        st.setdefault("decisions", {})[module.name] = int(getattr(result, "decisions", 0) or 0)
        if default_result is not None:
          if default_result.ok:
            st["default_modules"].append(module.name)
            for k, v in self._scores(default_result).items():
              st["default_scores"][k] = v
              st["baselines"].setdefault(k, v)
        if not result.ok:
          stats["failed"] += 1
          stats["failures"].append((module.name, r.where() + str(result.reason)[:200]))
          progress.update(failed=1, node=r.node)
          continue
        batch.append((position[r.task_id], result))
        ndec += int(getattr(result, "decisions", 0) or 0)
        progress.update(extra=f"{ndec} decisions", node=r.node)
    progress.close()
    # Per-node throughput (modules/s) for the log and TensorBoard.
    stats["nodes"] = progress.node_rates()
    # Sampled order, not completion order: the update does not depend on which worker
    # or node finished first, so a fixed seed gives the same training anywhere.
    return [res for _, res in sorted(batch, key=lambda x: x[0])], stats

  def _module_defaults(self) -> dict:
    """The default's total score per module (keys may be "module::function")."""
    out = {}
    for k, v in self.state["default_scores"].items():
      m = self.problem.module_of(k)
      out[m] = out.get(m, 0.0) + v
    return out

  def _scores(self, result) -> dict:
    return self.problem.scores(result.module_name, result.reward)

  def make_experience(self, results, weights):
    """Per-decision arrays of one iteration (mlgo.training.experience)."""
    credit_lib.complete_batch(self.annotator, results)
    return experience.make_experience(self.problem, self.cfg, self.state, self.encoder,
                                      self.spec, self.rng, results, weights)

  @contextlib.contextmanager
  def _pool_for_a_step(self):
    """The compile workers of one collect or validation. They are started once and kept
    for the whole run, not started anew each step (on 2 cores that saved no measurable
    time, stop 68: collecting 461 s against 463 s; it starts fewer processes). A step
    that fails part-way closes them (no half-drained queue is carried over); the next
    step starts new ones."""
    if self._workers is None:
      self._workers = make_pool(self.cfg.pool, self.cfg.jobs)
    try:
      yield self._workers
    except BaseException:
      self.close()
      raise

  def close(self):
    """Stops the compile workers (run() does it when it returns)."""
    if self._workers is not None:
      self._workers.close()
      self._workers = None

  def train_on(self, exp):
    return self.learner.train_on(exp, self.rng)

  def export(self, weights, iteration, can_be_kept: bool = True):
    """OUTPUT/policies/iter-N (and OUTPUT/policy). With validation, only the iterations it
    judges can become best_policy, so only they get a SavedModel (save_saved_model):
    one a step cost 0.44 s, 53 s of a 120-iteration run (stop 69). The others can still
    be exported (mlgo.export writes the SavedModel from policy.json + weights.npz)."""
    return policy_io.publish_iteration_policy(
        self.output, iteration, self.spec, weights,
        saved_model=self.cfg.save_saved_model and can_be_kept, keep=self.cfg.keep_policies)

  def save_checkpoint(self):
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="checkpoint.tmp", dir=self.output))
    self.checkpoint.write(str(tmp / "tf" / "ckpt"))
    with open(tmp / "tf" / "checkpoint", "w") as f:
      f.write('model_checkpoint_path: "ckpt"\n')
    self.state["rng"] = self.rng.bit_generator.state
    write_json_atomic(tmp / "state.json", self.state)
    old = self.ckpt_dir.with_name("checkpoint.old")
    shutil.rmtree(old, ignore_errors=True)
    if self.ckpt_dir.exists():
      os.rename(self.ckpt_dir, old)
    os.rename(tmp, self.ckpt_dir)
    shutil.rmtree(old, ignore_errors=True)

  def validation_set(self):
    return selection.validation_set(self.validation_pool or self.train_modules, self.state,
                                    self.cfg)

  def hot_set(self):
    return selection.hot_set(self.validation_pool or self.train_modules, self.state,
                             self.cfg, self.problem)

  def validate(self, weights):
    """Greedy policy on the validation modules: (change vs default in %, CPU seconds,
    (the hot modules' worst ratio to the default, its module) or None where not
    checked)."""
    with self._pool_for_a_step() as pool:
      val, cpu = selection.validate(self.problem, self.corpus, self.validation_set(),
                                    self.spec, weights, self.state["default_scores"],
                                    self.cfg, self.state, pool=pool)
      hot = None
      if selection.needs_hot_check(self.state, val, self.cfg):
        worst, where, hcpu = selection.hot_check(
            self.problem, self.corpus, self.hot_set(), self.spec, weights,
            self.state["default_scores"], self.cfg, self.state, pool=pool)
        cpu += hcpu
        hot = (worst, where)
    return val, cpu, hot

  def sampling_pool(self) -> list:
    """The training modules an iteration draws from (PPOConfig.skip_decisionless)."""
    cfg, st = self.cfg, self.state
    if cfg.skip_decisionless not in (True, False, "trace"):
      raise ValueError(f"PPOConfig.skip_decisionless={cfg.skip_decisionless!r}: True, False "
                       f"or 'trace'")
    mods = selection.within_size(self.train_modules, cfg)
    if not cfg.skip_decisionless:
      return mods
    nd = (st.get("trace_decisions", {}) if cfg.skip_decisionless == "trace"
          else st.setdefault("decisions", {}))
    cap = cfg.max_module_decisions or float("inf")
    return [m for m in mods if 0 < nd.get(m.name, 1) <= cap] or mods

  def iteration(self):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    cfg, st = self.cfg, self.state
    it = st["iteration"] + 1
    t0 = time.monotonic()
    pool_mods = self.sampling_pool()
    k = min(cfg.modules_per_iteration, len(pool_mods))
    prob = None
    if cfg.module_sampling == "sqrt_score":
      totals = self._module_defaults()
      w = np.array([np.sqrt(max(totals.get(m.name, 0.0), 0.0)) for m in pool_mods])
      w = np.where(w > 0, w, np.median(w[w > 0]) if (w > 0).any() else 1.0)
      prob = w / w.sum()
      k = min(k, int((prob > 0).sum()))
    idx = self.rng.choice(len(pool_mods), size=k, replace=False, p=prob)
    modules = [pool_mods[i] for i in idx]
    weights = self.current_weights()
    results, cstats = self.collect(modules, weights)
    t_collect = time.monotonic() - t0
    t1 = time.monotonic()
    exp, module_rewards, sizes = self.make_experience(results, weights)
    loss = self.train_on(exp) if exp is not None else float("nan")
    t_train = time.monotonic() - t1
    t2 = time.monotonic()
    new_weights = self.current_weights()
    validating = bool(cfg.validate_every) and it % cfg.validate_every == 0
    self.export(new_weights, it, can_be_kept=validating or not cfg.validate_every)
    t_export = time.monotonic() - t2
    decisions = int(len(exp["rewards"])) if exp is not None else 0
    entropy = float(np.mean(self.encoder.arch.entropy(exp["params"]))) if exp else float("nan")
    change = (sizes["policy"] / sizes["default"] - 1.0) if sizes["default"] else float("nan")
    rec = {"iteration": it, "modules": len(modules), "ok": len(results),
           "failed": cstats["failed"], "cancelled": cstats["cancelled"],
           "decisions": decisions, "reward_mean": float(np.mean(module_rewards))
           if module_rewards else float("nan"),
           "size_change_vs_default": change, "entropy": entropy, "loss": loss,
           "collect_seconds": t_collect, "train_seconds": t_train, "export_seconds": t_export,
           "compile_cpu_seconds": cstats["cpu_seconds"],
           "modules_per_second_by_node": cstats.get("nodes", {}),
           "failures": cstats["failures"][:5]}
    if cfg.credit:
      rec["credit_missing"] = sizes.get("credit_missing", 0)
    if validating:
      t3 = time.monotonic()
      val, vcpu, hot = self.validate(new_weights)
      rec["validation_change_pct"] = val
      if hot is not None:
        rec["validation_worst_hot_ratio"] = hot[0]
      rec["validation_seconds"] = time.monotonic() - t3
      cstats["cpu_seconds"] += vcpu
      self._keep_if_best(val, it, self.output / "policies" / f"iter-{it:05d}", hot)
    tot = st["totals"]
    tot["failed"] += cstats["failed"]
    tot["cancelled"] += cstats["cancelled"]
    tot["compiles"] += len(modules)
    tot["cpu_seconds"] += cstats["cpu_seconds"] + t_train + t_export
    tot["wall_seconds"] += time.monotonic() - t0
    st["iteration"] = it
    with self.summary.as_default(step=it):
      for key in ("reward_mean", "size_change_vs_default", "entropy", "decisions", "loss",
                  "collect_seconds", "train_seconds", "export_seconds", "failed", "cancelled",
                  "validation_change_pct"):
        if key in rec and rec[key] == rec[key]:
          tf.summary.scalar(key, rec[key])
      for node, rate in rec["modules_per_second_by_node"].items():
        tf.summary.scalar(f"workers/{node}/modules_per_second", rate)
    self.summary.flush()
    # The record goes out before the checkpoint: a kill between the two leaves a record the
    # resume drops (_trim_log) and redoes, never a finished iteration missing from the log.
    with open(self.output / "log.jsonl", "a") as f:
      f.write(json.dumps(rec) + "\n")
    self.save_checkpoint()
    print(f"iteration {it}: {len(modules)} modules, {rec['ok']} compiles ok ({rec['failed']} failed, "
          f"{rec['cancelled']} cancelled), {decisions} decisions, reward "
          f"{rec['reward_mean']:+.4f}, size vs default {change * 100:+.2f}%, entropy "
          f"{entropy:.3f}, collect {t_collect:.1f}s train {t_train:.1f}s export "
          f"{t_export:.1f}s", file=self.stream, flush=True)
    return rec

  @property
  def validation_where(self) -> str:
    """What the validation modules are, for progress lines."""
    return "modules of held-out packages" if self.validation_pool else "training modules"

  def _keep_if_best(self, val: float, it: int, policy_dir, hot=None):
    """hot: validate's (worst ratio, module) of the hot modules, or None."""
    limit = float(self.cfg.validation_hot_limit or 0.0)
    worst = hot[0] if hot is not None else None
    selection.keep_if_best(self.state, self.output, val, it, policy_dir, worst, limit)
    b = self.state.get("best_validation") or {"change_pct": float("nan"), "iteration": None}
    line = ""
    if hot is not None:
      line = (f"; hot modules: worst {worst:.2f}x the default ({hot[1]}), "
              + (f"over {limit:g}x, not kept" if worst > limit else f"within {limit:g}x"))
    print(f"iteration {it}: greedy validation on {len(self.validation_set())} "
          f"{self.validation_where} "
          f"{val:+.3f}% vs default ({self.cfg.validation_metric}{line}; best "
          f"{b['change_pct']:+.3f}% at iteration {b['iteration']})", file=self.stream,
          flush=True)

  def run(self, num_iterations: int | None = None, time_budget: float | None = None):
    n = num_iterations if num_iterations is not None else self.cfg.num_iterations
    t0 = time.monotonic()
    recs = []
    if self.cfg.validate_every and "best_validation" not in self.state:
      # The starting policy (the warm start) competes too: PPO must beat it to be kept.
      w = self.current_weights()
      d = self.export(w, self.state["iteration"])
      val, _, hot = self.validate(w)
      self._keep_if_best(val, self.state["iteration"], d, hot)
      self.save_checkpoint()
    try:
      while self.state["iteration"] < n:
        if time_budget is not None and recs:
          per = (time.monotonic() - t0) / len(recs)
          if time.monotonic() - t0 + per > time_budget:
            print(f"time budget reached after iteration {self.state['iteration']}",
                  file=self.stream)
            break
        recs.append(self.iteration())
    finally:
      self.close()
    return recs

