"""From compile results to a PPO batch, for any problem: each key's (module's or
function's) reward against its baseline (the leave-one-out mean of the iteration's other
samples, or a moving average of the policy's own scores started at the default's),
credited to every decision of that key; loss weights (per decision, module or sqrt, times
(default score + d) ** score_weighting_power); an optional extra penalty for keys more
than 1% worse than the default (regression_penalty); seeded subsampling per compile and
per batch; with a credit (cfg.credit, mlgo.credit) each decision's reward also gets
-credit_weight * (its estimated score change) / (the key's default score), and the key's
shared reward is weighted by cfg.module_reward_weight (0: the credit alone). Kept apart
from the trainer: this is where a problem's reward becomes training
signal, the trainer only moves batches through tf-agents.
"""
import numpy as np


def make_experience(problem, cfg, st, encoder, spec, rng, results, weights):
  """Per-decision arrays of one PPO iteration: encoded observations, actions (in the
  distribution's space), the collecting policy's distribution parameters, rewards and
  loss weights; plus the per-module mean rewards and the policy/default score totals.
  Updates the moving-average baselines in `st` (the trainer's state)."""
  obs, acts, rewards, wts = [], [], [], []
  module_rewards, sizes = [], {"policy": 0.0, "default": 0.0}
  all_scores = [problem.scores(res.module_name, res.reward) for res in results]
  group = {}
  if cfg.baseline == "group":
    for sc in all_scores:
      for k, v in sc.items():
        group.setdefault(k, []).append(v)
  old_baselines = dict(st["baselines"])
  known = set(st.get("default_modules", ()))
  arch = encoder.arch
  credit_missing = 0
  for res, scores in zip(results, all_scores):
    deltas = None
    if getattr(cfg, "credit", ""):
      deltas = (getattr(res, "annotations", None) or {}).get("decision_delta")
      if deltas is None or len(deltas) != len(res.trajectories):
        deltas = None     # e.g. remarks that did not line up: the key's reward alone
        credit_missing += 1
    rew = {}
    for k, s in scores.items():
      base = old_baselines.get(k)
      g = group.get(k, [])
      if len(g) >= 2:
        base = (sum(g) - s) / (len(g) - 1)
      if (base is None and problem.missing_score is not None and res.module_name in known
          and k not in st["default_scores"]):
        # The default's compile of this module had no score for k (regalloc: no spill
        # code in that function): its default is the missing score, and a policy that
        # adds spill code there is worse than the default.
        base = st["default_scores"][k] = problem.missing_score
        st["baselines"][k] = base
      if base is None:
        continue
      rew[k] = problem.reward_value(s, base)
      d0 = st["default_scores"].get(k)
      if cfg.regression_penalty and d0 is not None:
        # Worse than the default by more than the 1% users count as a regression: an
        # extra cost on top of the baseline's, so the policy learns to leave alone what
        # it cannot improve (the regression count is what users judge first).
        excess = (s + problem.reward_delta) / (d0 + problem.reward_delta) - 1.01
        if excess > 0:
          rew[k] -= cfg.regression_penalty * excess
      if k in st["default_scores"]:
        sizes["policy"] += s
        sizes["default"] += st["default_scores"][k]
    if rew:
      module_rewards.append(float(np.mean(list(rew.values()))))
    n_mod = sum(len(t.actions) for t in res.trajectories)
    room = cfg.max_decisions_per_module or n_mod
    for ti, t in enumerate(res.trajectories):
      k = problem.trajectory_key(res.module_name, t)
      n = len(t.actions)
      if k not in rew or n == 0 or room <= 0:
        continue
      keep = np.arange(n)
      if n > room:
        keep = np.sort(rng.choice(n, room, replace=False))
      room -= len(keep)
      feats = {f: np.asarray(t.features[f])[keep] for f in encoder.input_names}
      obs.append(encoder.encode_batch(feats))
      a = arch.train_actions(np.asarray(t.actions)[keep])
      m = len(keep)
      acts.append(a.reshape(m) if a.size == m else a.reshape(m, -1))
      r = np.full(m, rew[k] * getattr(cfg, "module_reward_weight", 1.0), np.float32)
      if deltas is not None and len(deltas[ti]) == n:
        d0 = st["default_scores"].get(k, scores[k])
        r -= (cfg.credit_weight * np.asarray(deltas[ti], np.float64)[keep] /
              (d0 + problem.reward_delta)).astype(np.float32)
      rewards.append(r)
      if cfg.decision_weighting == "module":
        w = 1.0 / max(1, n_mod)
      elif cfg.decision_weighting == "sqrt":
        w = 1.0 / np.sqrt(max(1, n_mod))
      else:
        w = 1.0
      if cfg.score_weighting_power:
        d0 = st["default_scores"].get(k, scores[k])
        w *= (d0 + problem.reward_delta) ** cfg.score_weighting_power
      wts.append(np.full(m, w, np.float32))
    # Moving-average baseline of the policy's own scores.
    mom = cfg.baseline_momentum
    for k, s in scores.items():
      if k in st["baselines"]:
        st["baselines"][k] = mom * st["baselines"][k] + (1 - mom) * s
      elif k in st["default_scores"]:
        st["baselines"][k] = mom * st["default_scores"][k] + (1 - mom) * s
  sizes["credit_missing"] = credit_missing
  if not obs:
    return None, module_rewards, sizes
  obs = np.concatenate(obs)
  acts = np.concatenate(acts)
  wts = np.concatenate(wts)
  rewards = np.concatenate(rewards)
  if cfg.max_decisions_per_iteration and len(rewards) > cfg.max_decisions_per_iteration:
    keep = np.sort(rng.choice(len(rewards), cfg.max_decisions_per_iteration,
                                   replace=False))
    obs, acts, wts, rewards = obs[keep], acts[keep], wts[keep], rewards[keep]
  wts = wts * (len(wts) / wts.sum())
  if cfg.batch_advantage_normalization:
    # Advantages standardized over the whole batch, as textbook PPO does. tf-agents
    # standardizes per minibatch and drops decisions whose advantage is exactly 0 (in
    # regalloc most functions keep their cost, so most rewards are 0); standardizing
    # first keeps them: when the batch's mean reward is negative, keeping the
    # default-like decisions of unchanged functions is better than average.
    rewards = ((rewards - rewards.mean()) / (rewards.std() + 1e-6)).astype(np.float32)
  params = type(arch)(spec["architecture"], weights).dist_params(obs)
  params = {k: v for k, v in params.items() if k in arch.DIST_PARAMS}
  return {"obs": obs, "actions": acts, "params": params,
          "rewards": rewards, "weights": wts}, module_rewards, sizes
