"""Rollout probes that flip every call to one callee at once (inlining).

A single-site probe (rollouts, multi_flip) asks what one call site's other answer does.
Some choices only pay as a whole: a small static callee with many callers that clang
inlines everywhere. Keeping one call keeps the callee's body alive and saves one copy,
often a net loss; keeping all of them deletes every copy but one. Measured on training
modules (stop 103, models/inlining_oz_ctx/SELECTION_RULES.md): cJSON.c's allocator
helper (19 calls) gains 0 bytes kept at one site and 243 kept at all; qpdf's sha2.c
helper (16 calls) costs 525 bytes kept at one and gains 543 kept at all. Single-site
probes see the first column only, so a policy trained on them learns to inline there.

A callee probe compiles the module with the probed policy deciding everything except
the calls to one callee, which the compiler is told to treat the other way: LLVM's
`-force-attribute=NAME:noinline` (the policy inlined most of its calls) or
`NAME:alwaysinline` (it kept most of them). Those calls then never reach the policy;
the module's measured score change D is the effect of answering them all otherwise.
Each of the flipped calls that the policy answered itself becomes a probe with score
change D / (calls flipped): the labels all say the same thing, and the group weighs in
fine-tuning about as much as its bytes (a probe's weight grows with its change).

Only flips that gained become probes. A flip that lost says that not all of the calls
should change, nothing about any one of them: its labels would all be the policy's own
answers (the anchors' job), and, as many as the calls, they would outweigh the single
flips at the same calls, which do say something about each.

Where a callee's flip gained, single-site probes at its calls that say the one flip
alone does not are left out of training (`superseded`).

Callees come from the greedy compile's remarks (function_size annotations name every
decision's callee). A callee is a candidate when at least `min_sites` of its calls were
answered the majority way by the policy itself, and those are at least `MIN_OWN_SHARE`
of the calls so answered: the rest are calls its deferrals leave to clang, which the
released policy cannot answer otherwise (e.g. a module too small for the policy), so a
group mostly deferred would be learned only in part. The probes are the policy's own
calls; each is credited D / (all calls flipped), its share of the group's change.
"""
import collections

import numpy as np

# The fewest calls answered alike, by the policy itself, that make a callee a
# candidate: with one or two calls a single-site probe already sees the whole choice.
MIN_SITES = 3
# The least share of a candidate's flipped calls that the policy answers itself (not
# deferred to clang). Stop 104, C30's K on training modules: cJSON_New_Item 16 of 17
# calls, libsodium's fBlaMka 119 of 128; qpdf's sha2.c helper 4 of 16 (the module is
# mostly below the policy's edge-count range), which keeping would only half do.
MIN_OWN_SHARE = 0.75


class Group(collections.namedtuple("Group", "callee major flip own")):
  """A candidate: `callee`, the policy's majority answer at its calls (1 inline, 0
  keep), the greedy positions answered that way (`flip`, all forced the other way) and
  those of them the policy decides itself (`own`, the ones that become probes)."""


def force_flags(callee: str, majority_action: int) -> list:
  """clang cc1 flags that make every call to `callee` take the other answer than
  `majority_action` (1 inline, 0 keep) whatever the policy says."""
  if not callee or ":" in callee or "," in callee:
    raise ValueError(f"cannot force attributes on a function named {callee!r}")
  attr = "noinline" if int(majority_action) == 1 else "alwaysinline"
  return ["-mllvm", f"-force-attribute={callee}:{attr}"]


def candidates(callees, actions, eligible, min_sites: int = MIN_SITES,
               min_own_share: float = MIN_OWN_SHARE) -> list:
  """[Group] of a greedy compile's decisions (`callees[p]` names decision p's callee,
  `actions[p]` the policy's answer, `eligible[p]` whether the policy itself decides it
  and a probe may flip it): the callees with at least `min_sites` eligible calls
  answered the majority way (inline on a tie: the case single-site probes miss), those
  being at least `min_own_share` of the calls answered that way. Sorted by name."""
  sites = collections.defaultdict(list)
  for p, e in enumerate(callees[:len(actions)]):
    if e:
      sites[e].append(p)
  out = []
  acts = np.asarray(actions, np.int64)
  for e in sorted(sites):
    ps = np.asarray(sites[e], np.int64)
    a = acts[ps]
    major = 1 if 2 * int((a == 1).sum()) >= len(a) else 0
    flip = ps[a == major]
    own = flip[np.asarray(eligible, bool)[flip]]
    if len(own) >= min_sites and len(own) >= min_own_share * len(flip):
      out.append(Group(e, major, flip, own))
  return out


def choose(cands: list, k: int, rng) -> list:
  """Up to `k` of `cands`: first those the policy inlines (to be kept), then those it
  keeps, each kind drawn without replacement with chances in proportion to the probes
  each would make (a probe round's seed draws others next round). Inlined ones first:
  on 300 training modules with C30's K (stop 104), 17 of 52 such flips gained against
  5 of 80 of the others."""
  out = []
  for major in (1, 0):
    kind = [c for c in cands if c.major == major]
    n = min(k - len(out), len(kind))
    if n <= 0:
      continue
    w = np.asarray([len(c.own) for c in kind], np.float64)
    idx = rng.choice(len(kind), size=n, replace=False, p=w / w.sum())
    out += [kind[i] for i in sorted(int(i) for i in idx)]
  return out


def probe_callees(module, problem, policy, chosen: list, base_total: float, score,
                  failures: list, compile_kw: dict) -> list:
  """Runs in a probe worker after the greedy compile: one compile per chosen Group, the
  policy deciding everything else. `score(result)` is the module's total score,
  `base_total` the greedy compile's. Returns [(Group, the measured change D)] of the
  compiles that succeeded; failed ones are appended to `failures` and skipped."""
  from mlgo import env  # pylint: disable=import-outside-toplevel
  out = []
  for g in chosen:
    r = env.compile_module(module, problem, policy,
                           extra_flags=force_flags(g.callee, g.major), **compile_kw)
    if not r.ok:
      failures.append(f"callee {g.callee}: {str(r.reason)[:160]}")
      continue
    out.append((g, score(r) - base_total))
  return out


def superseded(positions: np.ndarray, single_change: np.ndarray, measured: list) -> np.ndarray:
  """Which single-site probes (greedy `positions`, measured `single_change`) a callee
  flip overrules: those at a call of a callee whose all-calls flip gained (D < 0) that
  say flipping this one call alone does not (change > 0). Both are true; trained side by
  side they would teach the policy to flip some of the calls, the worst of both (one
  kept call keeps the body alive). The gain is the whole group's, so it labels them."""
  out = np.zeros(len(positions), bool)
  for g, d in measured:
    if d < 0:
      out |= np.isin(positions, g.flip) & (np.nan_to_num(single_change, nan=0.0) > 0)
  return out


def records(measured: list, rows: np.ndarray, actions: np.ndarray, alts: np.ndarray,
            margins: np.ndarray, base_total: float, key_base_of) -> dict:
  """The probe arrays (rollouts' record keys) of `probe_callees`' results: one probe at
  each call the policy answered itself (Group.own), credited D / (all calls flipped).
  `key_base_of(p)`: the score of decision p's key in the greedy compile."""
  pos, change, group = [], [], []
  for k, (g, d) in enumerate(measured):
    pos += [int(p) for p in g.own]
    change += [d / len(g.flip)] * len(g.own)
    group += [k] * len(g.own)
  pos = np.asarray(pos, np.int64)
  change = np.asarray(change, np.float64)
  key_base = np.asarray([key_base_of(int(p)) for p in pos], np.float64)
  n = len(pos)
  return {"positions": pos, "margins": margins[pos] if n else np.zeros(0),
          "probe_features": rows[pos] if n else np.zeros((0, rows.shape[1])),
          "probe_actions": actions[pos], "probe_alternatives": alts[pos],
          "probe_sizes": base_total + change, "probe_predicted": change,
          "probe_key_base": key_base, "probe_key_scores": key_base + change,
          "mismatch": np.zeros(n, bool), "probe_attributed": np.ones(n, bool),
          "probe_group": np.asarray(group, np.int64) + 1}
