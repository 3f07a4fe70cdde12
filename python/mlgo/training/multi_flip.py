"""Several rollout probes in one compile, each credited by its own function's size.

A plain rollout probe (mlgo.training.rollouts) spends one compile on one decision: the
module's size change is that decision's effect. With the measured per-function credit
(mlgo.credit.function_size) a compile can carry several flips at once, as long as they
touch different functions: each flip is credited with what happened to its own caller
(and to its callee's survival) against the greedy compile, not with the module's total.
K flips a compile make probing up to K times cheaper (measured: 1.8 times the probes in
two thirds of the time at K=4; docs/ir2native.md); the credit's error is what it costs (the last
line of tools/probe_decisions compares the summed credits with the measured module
change of every compile, so the trade is visible).

Which flips share a compile: decisions whose caller and callee are all different
functions (names from the greedy compile's remarks), K at most.

Finding a call site again: the first flip of a compile sees exactly the greedy roll-in.
After it the compile diverges: decisions are added or dropped (an inlined body brings its
own call sites), so a later call site's position moves, and module-wide counts
(`Problem.probe_volatile`, e.g. the call graph's node and edge counts) change for every
later observation. A later flip is therefore matched by its observation without those
counts (the k-th occurrence of that vector, as in the greedy compile), and only where
the policy still makes the greedy compile's choice there; afterwards the flipped
compile's remarks must name the same caller and callee, or the probe counts as a
mismatch (not trained on).
"""
import types

import numpy as np


class MultiFlipPolicy:
  """The greedy `policy`, except at the call sites of `targets` (greedy positions), found
  again by their observation without the `volatile` features, where it answers
  `alternative(observation, action)`. `flipped` maps a target to (the position it was
  flipped at in this compile, the raw observation there)."""

  def __init__(self, policy, targets, greedy_rows, greedy_actions, alternative, keep_cols):
    self.policy = policy
    self.alternative = alternative
    self.keep = keep_cols
    self.want = {}
    for p in targets:
      self.want[match_key(greedy_rows, int(p), keep_cols)] = (int(p), int(greedy_actions[p]))
    self.seen = {}
    self.i = 0
    self.flipped = {}

  def act(self, observation):
    a = self.policy.act(observation)
    raw = self.policy.raw_vector(observation)
    v = raw[self.keep].tobytes()
    self.seen[v] = self.seen.get(v, 0) + 1
    hit = self.want.get((v, self.seen[v]))
    if hit is not None and hit[0] not in self.flipped and \
        int(np.asarray(a).reshape(-1)[0]) == hit[1]:
      alt = self.alternative(observation, a)
      if alt is not None:
        a = alt
        self.flipped[hit[0]] = (self.i, raw)
    self.i += 1
    return a


def match_key(rows: np.ndarray, p: int, keep_cols) -> tuple:
  """(greedy row p without the volatile columns, its occurrence number among rows 0..p)."""
  v = rows[p, keep_cols]
  same = np.all(rows[:p + 1, keep_cols] == v, axis=1)
  return v.tobytes(), int(same.sum())


def keep_columns(input_names, sizes, volatile) -> np.ndarray:
  """Columns of the policy's raw vector that are not volatile features."""
  cols, at = [], 0
  for n, s in zip(input_names, sizes):
    if n not in volatile:
      cols.extend(range(at, at + s))
    at += s
  return np.asarray(cols, np.int64)


def group_positions(positions, callers, callees, per_compile: int) -> list:
  """Positions in compiles of at most `per_compile`, no function shared between two
  decisions of one compile (first fit, in position order)."""
  pos = sorted(int(x) for x in positions)
  return pack_groups(pos, callers, callees, len(pos), per_compile, len(pos))


def pack_groups(candidates, callers, callees, compiles: int, per_compile: int,
                limit: int, groups: list | None = None) -> list:
  """First fit of `candidates` (positions, most wanted first) into at most `compiles`
  groups of at most `per_compile`, no function shared within a group, until `limit`
  positions are placed in all; a candidate that fits nowhere is skipped. `groups` (lists,
  extended in place) continues an earlier packing. The cost is fixed (`compiles`) and
  the flips are as many as the module's functions allow: a big module, whose compile is
  dear and which holds most of the bytes, gets up to compiles x per_compile probes."""
  groups = [] if groups is None else groups
  used = [{f for p in g for f in (callers[p], callees[p])} for g in groups]
  placed = {p for g in groups for p in g}
  for p in (int(x) for x in candidates):
    if len(placed) >= limit:
      break
    if p in placed:
      continue
    fns = {callers[p], callees[p]}
    for g, u in zip(groups, used):
      if len(g) < per_compile and not (fns & u):
        g.append(p)
        u |= fns
        placed.add(p)
        break
    else:
      if len(groups) < compiles:
        groups.append([p])
        used.append(set(fns))
        placed.add(p)
  return groups


def packed_positions(margins, eligible, callers, callees, compiles: int, per_compile: int,
                     random_fraction: float, rng) -> tuple:
  """(sorted positions, their groups) for `compiles` flip compiles of up to `per_compile`
  flips: the decisions the policy is least sure of first, then a `random_fraction` of the
  slots for others drawn uniformly (as `rollouts.choose_positions` does for single flips)."""
  cand = np.flatnonzero(eligible)
  if len(cand) == 0 or compiles < 1:
    return np.zeros(0, np.int64), []
  if len(callers) < len(margins) or len(callees) < len(margins):
    raise ValueError(f"the greedy compile names {len(callers)} decisions' callers, "
                     f"not {len(margins)}: no function_size annotations to pack by")
  slots = compiles * per_compile
  n_rand = int(round(slots * random_fraction))
  low = cand[np.argsort(np.abs(margins[cand]), kind="stable")]
  groups = pack_groups(low, callers, callees, compiles, per_compile, slots - n_rand)
  groups = pack_groups(rng.permutation(cand), callers, callees, compiles, per_compile,
                       slots, groups)
  groups = [sorted(g) for g in groups]
  return np.sort(np.asarray([p for g in groups for p in g], np.int64)), groups


def decision_names(result) -> tuple:
  """([caller], [callee]) of every decision of a compile, in the order the policy saw
  them (over its trajectories that have decisions), from the function_size annotations."""
  callers, callees = [], []
  for t, (c, e, _) in zip(result.trajectories, result.annotations.get("decisions", [])):
    if len(t.actions):
      callers += list(c)
      callees += list(e)
  return callers, callees


def check_site(flipped_names, at: int, greedy_names, p: int) -> bool:
  """Whether decision `at` of the flipped compile is greedy decision `p`'s call site."""
  fc, fe = flipped_names[0], flipped_names[1]
  return at < len(fc) and fc[at] == greedy_names[0][p] and fe[at] == greedy_names[1][p]


def pair_deltas(annotator, flipped, base):
  """The function_size credit of every decision of compile `flipped` (over its
  trajectories), compared with compile `base` alone (None if either compile's
  annotations are unusable)."""
  pair = [types.SimpleNamespace(module_name=x.module_name,
                                annotations=dict(x.annotations or {}))
          for x in (flipped, base)]
  annotator.complete(pair)
  d = pair[0].annotations.get("decision_delta")
  if not d:
    return None
  return np.concatenate([np.asarray(x, np.float64) for x in d])


def probe_groups(module, problem, policy, base, pos, rows, actions, annotator,
                 per_compile: int, module_change, failures: list, *, compile_kw: dict,
                 out: dict, groups: list | None = None) -> list:
  """Runs in a probe worker after the greedy compile `base`: the probes at greedy
  positions `pos` (sorted; raw observations `rows`, greedy `actions`), several a compile.
  Fills, per probe, out["mismatch"] (not found again), out["attributed"] (credited),
  out["predicted"] (its credit, bytes) and out["features"] (the observation it was
  flipped on); appends failed compiles to `failures`. `groups` (from `packed_positions`)
  fixes which flips share a compile; by default `group_positions` forms them. Returns
  (summed credits, the compile's measured module change (`module_change(result)`),
  flips made) per compile."""
  from mlgo import env  # pylint: disable=import-outside-toplevel
  greedy_names = decision_names(base)
  keep = keep_columns(policy.input_names, policy.sizes, set(problem.probe_volatile))
  measured = []
  if groups is None:
    groups = group_positions(pos, *greedy_names, per_compile)
  for group in groups:
    mp = MultiFlipPolicy(policy, group, rows, actions, problem.probe_alternative, keep)
    r = env.compile_module(module, problem, mp, annotator=annotator, **compile_kw)
    if not r.ok:
      failures.append(f"flips {group}: {str(r.reason)[:160]}")
      continue
    deltas = pair_deltas(annotator, r, base)
    flipped_names = decision_names(r)
    credited = 0.0
    for p in group:
      j = int(np.searchsorted(pos, p))
      hit = mp.flipped.get(p)
      if (hit is None or deltas is None or
          not check_site(flipped_names, hit[0], greedy_names, p)):
        out["mismatch"][j] = True
        continue
      out["attributed"][j] = True
      out["predicted"][j] = float(deltas[hit[0]])
      out["features"][j] = hit[1]
      credited += out["predicted"][j]
    measured.append((credited, module_change(r), len(mp.flipped)))
  return measured


def group_agreement(groups) -> dict:
  """How well the summed credits of each multi-flip compile match its measured module
  change: `groups` holds (summed credits, measured change, flips made) per compile."""
  from mlgo.ir2native import model as model_lib  # pylint: disable=import-outside-toplevel
  g = np.asarray(groups, np.float64).reshape(-1, 3)
  moved = g[:, 1] != 0
  return {"multi_compiles": int(len(g)), "multi_flips": int(g[:, 2].sum()),
          "multi_sum_credit": float(g[:, 0].sum()), "multi_sum_measured": float(g[:, 1].sum()),
          "multi_spearman": round(model_lib.spearman(g[:, 0], g[:, 1]), 3) if len(g) > 2
          else float("nan"),
          "multi_sign": round(float(np.mean(np.sign(g[moved, 0]) == np.sign(g[moved, 1])))
                              if moved.any() else float("nan"), 3)}
