"""PPO for the regalloc problems, with the policy in llc's loop.

One iteration: sample modules of the prepared training split (modules the trace saw
decisions in), compile each with the stochastic numpy policy answering every decision
(log-probabilities recorded), score every function (remarks cost, lower is better)
against its baseline (a moving average of the policy's own cost, started at the default
cost), credit each decision of a function with that function's reward
    r = clip(1 - (cost + d) / (baseline + d), -1, 1)
normalize the rewards into advantages, and run clipped-surrogate PPO epochs (with an
entropy bonus) on the decisions in TF. Every iteration exports a policy dir, writes an
atomic checkpoint (weights, Adam state, baselines, RNG state, iteration) and TensorBoard
scalars, so killing the trainer loses at most the iteration in flight.
"""
import concurrent.futures as cf
import json
import os
import pathlib
import shutil
import sys
import tempfile
import time

import gin
import numpy as np

from mlgo.regalloc import evaluate as eval_lib, llc_run, model as model_lib
from mlgo.training import policy_io
from mlgo.util.progress import Progress
from mlgo.util.files import write_json_atomic


@gin.configurable
class RegallocPPOConfig:
  """Hyperparameters (configs/regalloc_*.gin, --gin_bindings).

  validate_every: every N iterations, compile a fixed sample of `validation_modules`
    training modules with the greedy policy and keep the best policy so far (by total
    cost against the default) in best_policy/; 0 disables it. Training modules only:
    the held-out split stays untouched for the final report.
  cost_weighting_power: each decision of a function weighs (default cost + d) ** power
    in the PPO loss (normalized to mean 1): 0 treats all functions alike (the reward is
    relative), 0.5 leans toward the hot functions that dominate total cost.
  """

  def __init__(self, modules_per_iteration: int = 16, num_iterations: int = 1000,
               num_epochs: int = 3, minibatch: int = 512, learning_rate: float = 3e-4,
               entropy_coef: float = 0.003, clip_ratio: float = 0.2,
               reward_delta: float = 1.0, baseline_momentum: float = 0.8,
               max_decisions_per_module: int = 3000, max_decisions_per_iteration: int = 30000,
               jobs: int = 2, compile_timeout: float = 300.0, seed: int = 0,
               keep_policies: int = 1000, grad_clip: float = 1.0, validate_every: int = 0,
               validation_modules: int = 60, cost_weighting_power: float = 0.0):
    self.__dict__.update({k: v for k, v in locals().items() if k != "self"})

  def to_json(self):
    return dict(self.__dict__)


def _collect_one(bc_path, llc_flags, problem, spec, weights, seed, llvm_version, timeout):
  dec = eval_lib.make_decider(problem, spec, weights, greedy=False, seed=seed,
                              record_logp=True)
  return llc_run.run_llc(bc_path, llc_flags, problem, dec, llvm_version=llvm_version,
                         timeout=timeout)




class Trainer:

  def __init__(self, prepared, problem: str, output, *, spec=None, weights=None,
               train_modules=None, config: RegallocPPOConfig | None = None,
               stream=sys.stderr):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    self.tf = tf
    self.cfg = config or RegallocPPOConfig()
    self.prepared = prepared
    self.problem = problem
    self.stream = stream
    self.out = pathlib.Path(output)
    self.out.mkdir(parents=True, exist_ok=True)
    self.ckpt = self.out / "checkpoint"
    old = self.ckpt.with_name("checkpoint.old")
    if not self.ckpt.exists() and old.exists():
      os.rename(old, self.ckpt)
    self.modules = list(train_modules if train_modules is not None
                        else prepared.split("train"))
    if not self.modules:
      raise ValueError("no training modules")
    if (self.ckpt / "state.json").exists():
      with open(self.ckpt / "state.json") as f:
        self.state = json.load(f)
      if self.state.get("problem") != problem:
        raise ValueError(f"{self.ckpt}: checkpoint is for {self.state.get('problem')}; "
                         f"use another --output")
      self.spec = self.state["spec"]
      with np.load(self.ckpt / "weights.npz") as z:
        weights = {k: z[k] for k in z.files}
      resumed = True
    else:
      if spec is None or weights is None:
        raise ValueError("a fresh PPO run needs a warm-start spec and weights")
      self.spec = spec
      self.state = {"problem": problem, "iteration": 0, "spec": spec, "baselines": {},
                    "rng": np.random.default_rng(self.cfg.seed).bit_generator.state,
                    "totals": {"compiles": 0, "failed": 0, "cpu_seconds": 0.0,
                               "wall_seconds": 0.0},
                    "config": self.cfg.to_json()}
      resumed = False
    self.model = model_lib.TFPolicy(self.spec, weights)
    self.opt = tf.keras.optimizers.Adam(self.cfg.learning_rate)
    self.opt.build(self.model.trainable)
    self.tfckpt = tf.train.Checkpoint(optimizer=self.opt,
                                      **{k.replace("/", "_"): v for k, v in
                                         self.model.vars.items()})
    if resumed and (self.ckpt / "tf").exists():
      self.tfckpt.read(tf.train.latest_checkpoint(str(self.ckpt / "tf"))).expect_partial()
      print(f"resumed from {self.ckpt} at iteration {self.state['iteration']}",
            file=stream, flush=True)
    self.rng = np.random.default_rng()
    self.rng.bit_generator.state = self.state["rng"]
    self.encoder = policy_io.Policy(self.spec, self.model.numpy_weights())
    self.summary = tf.summary.create_file_writer(str(self.out / "tensorboard"))
    self._train_step = self._make_train_step()
    if not resumed:
      self.export(self.model.numpy_weights(), 0)

  # -------------------------------------------------------------------------------
  def _make_train_step(self):
    tf = self.tf
    m = self.model
    cfg = self.cfg
    train_vars = m.trainable

    @tf.function
    def step(enc, act, old_lp, adv, w):
      with tf.GradientTape() as tape:
        lp, ent = m.log_prob_entropy(enc, act)
        ratio = tf.exp(lp - old_lp)
        s1 = ratio * adv
        s2 = tf.clip_by_value(ratio, 1 - cfg.clip_ratio, 1 + cfg.clip_ratio) * adv
        pg = -tf.reduce_mean(w * tf.minimum(s1, s2))
        loss = pg - cfg.entropy_coef * tf.reduce_mean(w * ent)
      g = tape.gradient(loss, train_vars)
      g, _ = tf.clip_by_global_norm(g, cfg.grad_clip)
      self.opt.apply_gradients(zip(g, train_vars))
      return loss, tf.reduce_mean(ent), tf.reduce_mean(tf.abs(ratio - 1.0))
    return step

  def export(self, weights, it):
    return policy_io.publish_iteration_policy(self.out, it, self.spec, weights,
                                              saved_model=False,
                                              keep=self.cfg.keep_policies)

  def save_checkpoint(self, weights):
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="checkpoint.tmp", dir=self.out))
    self.tfckpt.write(str(tmp / "tf" / "ckpt"))
    with open(tmp / "tf" / "checkpoint", "w") as f:
      f.write('model_checkpoint_path: "ckpt"\n')
    np.savez(tmp / "weights.npz", **weights)
    self.state["rng"] = self.rng.bit_generator.state
    write_json_atomic(tmp / "state.json", self.state)
    old = self.ckpt.with_name("checkpoint.old")
    shutil.rmtree(old, ignore_errors=True)
    if self.ckpt.exists():
      os.rename(self.ckpt, old)
    os.rename(tmp, self.ckpt)
    shutil.rmtree(old, ignore_errors=True)

  # -------------------------------------------------------------------------------
  def collect(self, modules, weights):
    cfg = self.cfg
    results, failed, cpu = [], [], 0.0
    progress = Progress(f"iteration {self.state['iteration'] + 1} collect", len(modules),
                        stream=self.stream)
    with cf.ProcessPoolExecutor(max_workers=max(1, cfg.jobs)) as ex:
      futs = {ex.submit(_collect_one, m.bc_path, m.llc_flags, self.problem, self.spec,
                        weights, int(self.rng.integers(2**31)), self.prepared.llvm_version,
                        cfg.compile_timeout): m for m in modules}
      for fut in cf.as_completed(futs):
        m = futs[fut]
        try:
          res = fut.result()
        except Exception as e:
          res = llc_run.LlcResult(False, f"{type(e).__name__}: {e}", {}, [])
        cpu += res.seconds
        if not res.ok:
          failed.append((m.name, str(res.reason)[:200]))
          progress.update(failed=1)
          continue
        results.append((m, res))
        progress.update(extra=f"{sum(r.decisions for _, r in results)} decisions")
    progress.close()
    return results, failed, cpu

  def make_batch(self, results):
    cfg, st = self.cfg, self.state
    d = cfg.reward_delta
    feats, acts, lps, rews, wts = {}, [], [], [], []
    pol_total = def_total = 0.0
    func_rewards = []
    for m, res in results:
      for fn, cost in res.functions.items():
        if fn in m.baseline:
          pol_total += cost
          def_total += m.baseline[fn]
      n_mod = 0
      for t in res.trajectories:
        n = len(t.actions)
        if n == 0 or t.policy_info is None:
          continue
        key = f"{m.name}::{t.name}"
        cost = res.functions.get(t.name, 0.0)
        base = st["baselines"].get(key, m.baseline.get(t.name, cost))
        r = float(np.clip(1.0 - (cost + d) / (base + d), -1.0, 1.0))
        func_rewards.append(r)
        keep = np.arange(n)
        room = cfg.max_decisions_per_module - n_mod
        if room <= 0:
          continue
        if n > room:
          keep = np.sort(self.rng.choice(n, room, replace=False))
        n_mod += len(keep)
        for k, v in t.features.items():
          feats.setdefault(k, []).append(v[keep])
        a = np.asarray(t.actions)[keep]
        if self.problem == llc_run.PRIORITY:
          a = np.log2(np.maximum(a.astype(np.float64), 1.0)).astype(np.float32)
        acts.append(a)
        lps.append(np.asarray(t.policy_info["logp"], np.float32)[keep])
        rews.append(np.full(len(keep), r, np.float32))
        wts.append(np.full(len(keep), (m.baseline.get(t.name, cost) + d) **
                           cfg.cost_weighting_power, np.float64))
      for fn, cost in res.functions.items():
        key = f"{m.name}::{fn}"
        b = st["baselines"].get(key, m.baseline.get(fn, cost))
        st["baselines"][key] = cfg.baseline_momentum * b + (1 - cfg.baseline_momentum) * cost
    if not acts:
      return None, func_rewards, pol_total, def_total
    feats = {k: np.concatenate(v) for k, v in feats.items()}
    acts = np.concatenate(acts)
    lps = np.concatenate(lps)
    rews = np.concatenate(rews)
    wts = np.concatenate(wts)
    n = len(rews)
    if n > cfg.max_decisions_per_iteration:
      keep = np.sort(self.rng.choice(n, cfg.max_decisions_per_iteration, replace=False))
      feats = {k: v[keep] for k, v in feats.items()}
      acts, lps, rews, wts = acts[keep], lps[keep], rews[keep], wts[keep]
    wts = (wts / wts.mean()).astype(np.float32)
    enc = model_lib.encode(self.spec, feats)
    adv = (rews - rews.mean()) / (rews.std() + 1e-6)
    return {"enc": enc, "act": acts, "logp": lps, "adv": adv.astype(np.float32),
            "reward": rews, "weight": wts}, func_rewards, pol_total, def_total

  def train_on(self, batch):
    tf = self.tf
    n = len(batch["adv"])
    stats = []
    for _ in range(self.cfg.num_epochs):
      perm = self.rng.permutation(n)
      for s in range(0, n, self.cfg.minibatch):
        b = perm[s:s + self.cfg.minibatch]
        if len(b) < 8:
          continue
        act = batch["act"][b]
        act = tf.constant(act.astype(np.int64) if self.problem == llc_run.EVICTION
                          else act.astype(np.float32))
        loss, ent, dev = self._train_step(tf.constant(batch["enc"][b]), act,
                                          tf.constant(batch["logp"][b]),
                                          tf.constant(batch["adv"][b]),
                                          tf.constant(batch["weight"][b]))
        stats.append((float(loss), float(ent), float(dev)))
    if not stats:
      return {"loss": float("nan"), "entropy": float("nan"), "ratio_dev": float("nan")}
    a = np.array(stats)
    return {"loss": float(a[:, 0].mean()), "entropy": float(a[:, 1].mean()),
            "ratio_dev": float(a[:, 2].mean())}

  def validate(self, weights):
    """Greedy policy on the fixed validation sample (training modules): returns
    (module_mean, total): the mean over modules of (policy + 1) / (default + 1) - 1, and
    the total cost change. Selection uses the module mean: corpus totals are dominated
    by a few hot functions (an interpreter loop can be 90% of a sample's cost)."""
    cfg = self.cfg
    rng = np.random.default_rng(cfg.seed + 12345)
    mods = self.modules
    if len(mods) > cfg.validation_modules:
      mods = [mods[i] for i in sorted(rng.choice(len(mods), cfg.validation_modules,
                                                 replace=False))]
    pol = pd = 0.0
    ratios = []
    with cf.ProcessPoolExecutor(max_workers=max(1, cfg.jobs)) as ex:
      futs = {ex.submit(eval_lib._eval_one, m.bc_path, m.llc_flags, self.problem, self.spec,
                        weights, self.prepared.llvm_version, cfg.compile_timeout): m
              for m in mods}
      for fut in cf.as_completed(futs):
        m = futs[fut]
        try:
          res = fut.result()
        except Exception:  # a failed module is left out of both totals
          continue
        if res.ok:
          p_m, d_m = sum(res.functions.values()), sum(m.baseline.values())
          pol += p_m
          pd += d_m
          ratios.append((p_m + 1.0) / (d_m + 1.0) - 1.0)
    total = (pol / pd - 1.0) if pd else float("nan")
    return (float(np.mean(ratios)) if ratios else float("nan")), total

  def iteration(self):
    cfg, st = self.cfg, self.state
    it = st["iteration"] + 1
    t0 = time.monotonic()
    k = min(cfg.modules_per_iteration, len(self.modules))
    idx = self.rng.choice(len(self.modules), size=k, replace=False)
    mods = [self.modules[i] for i in idx]
    weights = self.model.numpy_weights()
    results, failed, cpu = self.collect(mods, weights)
    t_collect = time.monotonic() - t0
    t1 = time.monotonic()
    batch, func_rewards, ptot, dtot = self.make_batch(results)
    tstats = self.train_on(batch) if batch is not None else {
        "loss": float("nan"), "entropy": float("nan"), "ratio_dev": float("nan")}
    t_train = time.monotonic() - t1
    new_w = self.model.numpy_weights()
    self.export(new_w, it)
    change = (ptot / dtot - 1.0) if dtot > 0 else float("nan")
    val = float("nan")
    if cfg.validate_every and it % cfg.validate_every == 0:
      val, val_total = self.validate(new_w)
      best = st.get("best_validation")
      if val == val and (best is None or val < best["change"]):
        st["best_validation"] = {"iteration": it, "change": val, "total_change": val_total}
        policy_io.write_policy_dir(self.out / "best_policy", self.spec, new_w,
                                   saved_model=False)
      print(f"validation (greedy, {cfg.validation_modules} training modules): mean module "
            f"cost vs default {val * 100:+.2f}% (total {val_total * 100:+.2f}%); best "
            f"{st['best_validation']['change'] * 100:+.2f}% at iteration "
            f"{st['best_validation']['iteration']}", file=self.stream, flush=True)
    rec = {"validation_change": val,
           "validation_total_change": val_total if cfg.validate_every and
           it % cfg.validate_every == 0 else float("nan"), "iteration": it, "modules": len(mods), "ok": len(results), "failed": len(failed),
           "decisions": int(len(batch["adv"])) if batch is not None else 0,
           "reward_mean": float(np.mean(func_rewards)) if func_rewards else float("nan"),
           "cost_change_vs_default": change, "collect_seconds": t_collect,
           "train_seconds": t_train, "compile_cpu_seconds": cpu, **tstats,
           "failures": failed[:3]}
    st["iteration"] = it
    tot = st["totals"]
    tot["compiles"] += len(mods)
    tot["failed"] += len(failed)
    tot["cpu_seconds"] += cpu + t_train
    tot["wall_seconds"] += time.monotonic() - t0
    with self.summary.as_default(step=it):
      for key in ("validation_change", "reward_mean", "cost_change_vs_default", "decisions", "loss", "entropy",
                  "ratio_dev", "collect_seconds", "train_seconds", "failed"):
        if rec[key] == rec[key]:
          self.tf.summary.scalar(key, rec[key])
    self.summary.flush()
    self.save_checkpoint(new_w)
    with open(self.out / "log.jsonl", "a") as f:
      f.write(json.dumps(rec) + "\n")
    print(f"iteration {it}: {rec['ok']}/{len(mods)} modules ok, {rec['decisions']} decisions, "
          f"reward {rec['reward_mean']:+.4f}, sampled cost vs default {change * 100:+.2f}%, "
          f"entropy {rec['entropy']:.3f}, collect {t_collect:.1f}s train {t_train:.1f}s",
          file=self.stream, flush=True)
    return rec

  def run(self, num_iterations=None, time_budget=None):
    n = num_iterations if num_iterations is not None else self.cfg.num_iterations
    t0 = time.monotonic()
    recs = []
    if self.cfg.validate_every and "total_change" not in self.state.get("best_validation",
                                                                         {}):
      w = self.model.numpy_weights()
      val, total = self.validate(w)
      self.state["best_validation"] = {"iteration": self.state["iteration"], "change": val,
                                       "total_change": total}
      policy_io.write_policy_dir(self.out / "best_policy", self.spec, w, saved_model=False)
      print(f"validation of the starting policy (iteration {self.state['iteration']}): mean "
            f"module cost vs default {val * 100:+.2f}% (total {total * 100:+.2f}%)",
            file=self.stream, flush=True)
    while self.state["iteration"] < n:
      if time_budget is not None and recs:
        per = (time.monotonic() - t0) / len(recs)
        if time.monotonic() - t0 + per > time_budget:
          print(f"PPO: time budget reached after iteration {self.state['iteration']}",
                file=self.stream, flush=True)
          break
      if time_budget is not None and not recs and time_budget <= 0:
        break
      recs.append(self.iteration())
    return recs
