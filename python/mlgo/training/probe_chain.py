"""A whole inliner training as one resumable command: a start policy, then rounds of
rollout probes and fine-tuning, with a ledger of CPU-hours and a selection rule that
never looks past the training split.

  start   a behavioral clone of the default (trace + BC), or a given policy; with
          `defer`, a copy of it that leaves those decisions to clang, from round 1 on
          (probes never flip them, and every round's policy keeps the deferral)
  ppo     optionally, PPO from the start (the one trainer, a gin file; its best
          validated policy goes on): it moves every decision at once, a probe round
          only the few it probes
  round r probe_corpus(policy_r) -> train_on_probes(policy_r, probes of rounds r-1, r)
          [-> weight average with policy_r] = policy_r+1
          (tune_seeds > 1: several tunings, the one agreeing best with the held modules'
          probe labels goes on, or with tune_select=held_bytes the one whose greedy
          compile of the held modules is smallest, held_capped the same with no module
          weighing more than 5% of them; tune_guard: policy_r again if none beats it on
          that measure, or with tune_guard_margin none is within that many points of
          the smallest held figure the chain has had)
  final   policy_N+1 evaluated on the training split; every earlier policy's figure
          comes free from the greedy compiles of the probe round that started from it
          (the same compile evaluate makes: same bytes)
  select  the policy with the lowest training-split total among those with at most
          `max_regressed_pct` of training modules more than 1% bigger (the start is one
          of the candidates; if none qualifies, the fewest regressed), copied to
          OUTPUT/policy

OUTPUT/chain.json is the ledger: every stage with its wall seconds and CPU-hours, counted
as wall time x the workers the chain uses (how the shipped models' TRAINING.md counts
them; the machine does nothing else). A stage that was cut (session end, Ctrl-C) is
counted up to its last heartbeat (every 30 s) and then run again: probe rounds and
traces continue where they stopped, the rest restarts. OUTPUT/chain.png plots the
training-split total against CPU-hours.
"""
import csv
import dataclasses
import json
import pathlib
import shutil
import sys
import threading
import time

from mlgo.evaluation.evaluate import evaluate
from mlgo.policy import derived, policy_io
from mlgo.problems import get_problem
from mlgo.util import files

HEARTBEAT_S = 30.0
# The probed policy's greedy compiles (rollouts.GreedyCache): a round whose guard kept its
# probed policy probes it again with new seeds and needs only the flip compiles (stop 95:
# C26's rounds 6-10 re-probed one policy, 40% of its budget, each greedy compile again).
GREEDY_CACHE = "greedy-cache"


@dataclasses.dataclass
class ChainConfig:
  corpus: str
  output: str
  problem: str = "inlining_ir2vec"
  start: str | None = None          # a policy dir; None: clone the default (trace + BC)
  rounds: int = 6
  cpu_hours: float | None = None    # no round starts that would end past this (evaluated)
  jobs: int = 2
  max_probes: int = 16
  flips_per_compile: int = 4
  flip_compiles: int = 0            # > 0: that many flip compiles a module, packed (rollouts)
  # > 0: that many more compiles a module, each flipping every call to one callee
  # (rollouts, callee_groups). Stop 104: single flips never see what keeping all calls
  # to a small many-caller callee saves (0.57% of 200 training modules against C30's K).
  callee_groups: int = 0
  credit: str = "function_size"
  random_fraction: float = 0.25
  next_policy: str = "tuned"        # "tuned" or "average" (of the probed and tuned policy)
  # "average": the tuned policy's share (1 = "tuned"), one per round, the last repeating
  # (a schedule: big steps first, smaller ones later; a float is one weight for all rounds)
  average_weight: tuple[float, ...] | float = (0.5,)
  probe_rounds_kept: int = 2        # fine-tuning reads this many latest rounds' probes
  # True: probe_rounds_kept counts policies, not rounds: the probes of rounds that probed
  # the same weights (a guarded round kept its probed policy) all stay in (stop 99: C28
  # stalled in five of its last six rounds and dropped those rounds' probes after two)
  keep_stalled_probes: bool = False
  regression_penalty: float = 0.0   # probe_tuning: bytes past 1.01 x default weigh 1 + this
  # probe_tuning's anchors: "current" (the probed policy's own decisions: stay put) or
  # "best" (each module's best round so far, with that round's decisions: return there)
  anchors: str = "current"
  # probe_tuning's probe weights: "module" (relative to the module's size) or
  # "module_or_bytes" (the larger of that and the bytes changed: big modules count too);
  # a schedule "module_or_bytes*6,module" is one a round, the last repeating (stop 84:
  # byte weights reach the target sooner, then fit a few large modules)
  weighting: str = "module"
  # > 1: after the rounds, the weight average of the last this many rounds' policies is a
  # candidate too (evaluated, counted): one round carries its own probes' noise, the
  # average less of it (stop 82: C18's rounds 9-14 averaged carried over better)
  tail_average: int = 0
  # > 1: each round fine-tunes this many times (seeds seed, seed + 1, ...) and goes on with
  # the tuning that agrees best with the probe labels of the modules fine-tuning holds out
  # (stop 88: C21's tunings differ by seed, and the round whose agreement fell was worse)
  tune_seeds: int = 1
  # True: when no tuning raises that agreement above the probed policy's, the round's
  # policy is the probed one (the next round probes it again, with new probe seeds)
  tune_guard: bool = False
  # What picks among a round's tunings (and what the guard compares): "agreement" (the
  # held-out probe agreement, free) or "held_bytes" (each tuning compiled greedily on the
  # modules fine-tuning holds out, ~15% of a greedy pass each, counted in the tune stage;
  # the smallest total goes on; the probed policy's comes from its probe round). Stop 89:
  # C22's round 5 raised the agreement with every seed and still fell on the training
  # split; the held modules' bytes ranked all of C21's and C22's falls right.
  # "held_capped": the same compiles, each module's weight in the total capped at HELD_CAP
  # of the held bytes (the same figure as held_bytes when no module is that big). Stop 93:
  # one module of C25's 137 held 47% of their bytes and its guard kept round 9's policy
  # twice against tunings that made the other 136 smaller; round 10's seed-10 tuning, so
  # refused, was 0.18 points smaller on the whole training split (-5.60% vs -5.42%).
  tune_select: str = "agreement"
  # With tune_guard and a held select: the best tuning also goes on when its held figure is
  # within this many points of the smallest held figure any policy of the chain has had.
  # Stop 101: C29's guard refused seven rounds in a row against round 9's -5.54%, itself
  # the best of three seeds on the same 137 modules; three of the refused tunings
  # (within 0.03-0.10 points there) were smaller than round 9 on the other 1,196 training
  # modules (-5.65%, -5.77%, -5.64% against -5.60%). Bounded by the chain's best, not the
  # probed policy's, so accepted steps cannot drift down round after round.
  tune_guard_margin: float = 0.0
  # A deferral in defer_policy's terms ("margin=0.4,outside=2,nonzero=NAME,below=NAME=V"):
  # the start leaves those decisions to clang, so every round is trained with clang making
  # them. Stop 91: the shipped model's deferrals added after a chain cost C23 0.68 points
  # of the training split, and without them two chains lost held out on the largest
  # module, where the shipped model leaves decisions outside its range to clang.
  defer: str = ""
  max_regressed_pct: float = 3.0
  ppo_iterations: int = 0           # > 0: a PPO stage between the start and the rounds
  ppo_gin: str = "configs/inlining.gin"
  # The share of training modules whose default trace makes the clone. It also sets the
  # range an `outside` deferral measures against (the normalization's): C24 (0.25) left
  # 14% of the training split's decisions, most of its largest modules, to clang.
  trace_sampling: float = 0.25
  bc_epochs: int = 2
  seed: int = 0
  timeout: float = 300.0

  def __post_init__(self):
    self.average_weight = weight_schedule(self.average_weight)
    self.weighting = ",".join(weighting_schedule(self.weighting))

  def weighting_for(self, round_no: int) -> str:
    """Fine-tuning's probe weighting in round `round_no` (rounds count from 1)."""
    return in_round(weighting_schedule(self.weighting), round_no)

  def weight_for(self, round_no: int) -> float:
    """The tuned policy's share of round `round_no`'s average (rounds count from 1)."""
    return in_round(self.average_weight, round_no)

  def check(self):
    from mlgo.training.probe_tuning import WEIGHTINGS  # pylint: disable=import-outside-toplevel
    bad = [w for w in weighting_schedule(self.weighting) if w not in WEIGHTINGS]
    if bad:
      raise ValueError(f"weighting must be one of {', '.join(WEIGHTINGS)} (or a schedule "
                       f"of them, e.g. module_or_bytes*6,module), not {bad[0]!r}")
    if self.tail_average < 0 or self.tail_average == 1:
      raise ValueError(f"tail_average: 0 (none) or the number of rounds averaged (>= 2), "
                       f"not {self.tail_average}")
    if self.anchors not in ("current", "best"):
      raise ValueError(f"anchors must be 'current' or 'best', not {self.anchors!r}")
    if self.next_policy not in ("tuned", "average"):
      raise ValueError(f"next_policy must be 'tuned' or 'average', not {self.next_policy!r}")
    if not self.average_weight or not all(0.0 < w <= 1.0 for w in self.average_weight):
      raise ValueError(f"average_weight is the tuned policy's share, each in (0, 1], not "
                       f"{show_weights(self.average_weight)}")
    if self.tune_seeds < 1:
      raise ValueError(f"tune_seeds: the fine-tunings a round (>= 1), not {self.tune_seeds}")
    if self.tune_select not in TUNE_SELECT:
      raise ValueError(f"tune_select must be one of {', '.join(TUNE_SELECT)}, not "
                       f"{self.tune_select!r}")
    if self.tune_guard_margin < 0 or (self.tune_guard_margin and not (
        self.tune_guard and self.tune_select in HELD_SELECT)):
      raise ValueError(f"tune_guard_margin is points of the held modules' figure (>= 0), "
                       f"for tune_guard with tune_select={'|'.join(HELD_SELECT)}, not "
                       f"{self.tune_guard_margin} with tune_guard={self.tune_guard}, "
                       f"tune_select={self.tune_select}")
    if self.tune_select != "agreement" and self.tune_seeds == 1 and not self.tune_guard:
      raise ValueError(f"tune_select={self.tune_select} chooses among a round's policies: "
                       f"it needs tune_seeds > 1 or tune_guard")
    if self.rounds < 0 or self.probe_rounds_kept < 1 or self.jobs < 1:
      raise ValueError("rounds >= 0, probe_rounds_kept >= 1 and jobs >= 1 are needed")
    if self.flips_per_compile > 1 and self.credit != "function_size":
      raise ValueError("flips_per_compile > 1 needs credit='function_size'")
    if self.flip_compiles and self.flips_per_compile < 2:
      raise ValueError("flip_compiles > 0 packs flips: it needs flips_per_compile > 1")
    if self.callee_groups < 0:
      raise ValueError(f"callee_groups: compiles a module (>= 0), not {self.callee_groups}")
    if self.callee_groups and self.credit != "function_size":
      raise ValueError("callee_groups > 0 needs credit='function_size' (callee names)")
    derived.parse_deferral(self.defer)  # a bad deferral fails before anything runs
    if not 0.0 < self.trace_sampling <= 1.0:
      raise ValueError(f"trace_sampling: the share of training modules traced for the "
                       f"clone, in (0, 1], not {self.trace_sampling}")


def in_round(schedule: tuple, round_no: int):
  """A schedule's entry for round `round_no` (from 1): one a round, the last repeating."""
  return schedule[min(round_no, len(schedule)) - 1]


def weight_schedule(w) -> tuple[float, ...]:
  """A float, a list (a ledger's JSON) or "1,1,0.5" (the command line) as a tuple."""
  if isinstance(w, str):
    try:
      return tuple(float(x) for x in w.split(","))
    except ValueError:
      raise ValueError(f"average_weight: comma-separated numbers, not {w!r}") from None
  return tuple(float(x) for x in w) if isinstance(w, (list, tuple)) else (float(w),)


def weighting_schedule(w: str) -> tuple[str, ...]:
  """"module_or_bytes*2,module" -> ("module_or_bytes", "module_or_bytes", "module")."""
  out = []
  for item in str(w).split(","):
    name, _, times = item.strip().partition("*")
    try:
      n = int(times) if times else 1
    except ValueError:
      n = 0
    if n < 1:
      raise ValueError(f"weighting: NAME or NAME*ROUNDS items, comma-separated, not {w!r}")
    out += [name] * n
  return tuple(out)


def show_weights(w) -> str:
  return ",".join(f"{x:g}" for x in weight_schedule(w))


class Ledger:
  """OUTPUT/chain.json: the config, stages done (wall s, CPU-h), cut stages, policies
  measured. Written atomically after every change."""

  def __init__(self, path, config: ChainConfig):
    self.path = pathlib.Path(path)
    self.lock = threading.Lock()
    if self.path.exists():
      self.data = json.loads(self.path.read_text())
      old = self.data.get("config", {})
      fields = {f.name: f.default for f in dataclasses.fields(ChainConfig)}
      for k in ("corpus", "problem", "start", "jobs", "max_probes", "flips_per_compile",
                "flip_compiles", "credit", "next_policy", "average_weight", "seed",
                "regression_penalty", "anchors", "weighting", "ppo_iterations", "ppo_gin",
                "tune_seeds", "tune_guard", "tune_select", "defer", "trace_sampling",
                "probe_rounds_kept", "keep_stalled_probes", "tune_guard_margin",
                "callee_groups"):
        was, now = old.get(k, fields[k]), getattr(config, k)  # older ledger: the default
        show = repr
        if k == "average_weight":  # a float in ledgers before schedules, a list in JSON
          was, now, show = show_weights(was), show_weights(now), str
        if was != now:
          raise ValueError(f"{self.path}: a chain with {k}={show(was)} is here, not "
                           f"{show(now)}; use a new output dir")
      self.data["config"] = dataclasses.asdict(config)  # rounds and budget may grow
    else:
      self.data = {"format": 1, "config": dataclasses.asdict(config), "stages": {},
                   "cut": [], "running": None, "policies": {}, "made_at": {}}
    # A stage left running by a process that is gone was cut: count it, run it again.
    if self.data.get("running"):
      self.data["cut"].append(self.data["running"])
      self.data["running"] = None
    self.save()

  def save(self):
    with self.lock:
      tmp = self.path.with_suffix(".tmp")
      tmp.write_text(json.dumps(self.data, indent=1))
      tmp.replace(self.path)

  def done(self, name) -> bool:
    return name in self.data["stages"]

  def cpu_hours(self) -> float:
    return (sum(s["cpu_hours"] for s in self.data["stages"].values())
            + sum(s["cpu_hours"] for s in self.data["cut"]))

  def run(self, name, fn, jobs: int, stream):
    """Runs fn() as stage `name` unless it is done; heartbeats while it runs."""
    if self.done(name):
      return
    t0 = time.monotonic()
    stop = threading.Event()

    def spent() -> dict:
      wall = time.monotonic() - t0
      return {"wall_s": round(wall, 1), "cpu_hours": wall * jobs / 3600.0}

    def beat():
      while not stop.wait(HEARTBEAT_S):
        self.data["running"] = {"stage": name, **spent()}
        self.save()
    th = threading.Thread(target=beat, daemon=True)
    th.start()
    print(f"chain: stage {name} ({self.cpu_hours():.2f} CPU-h spent so far)", file=stream,
          flush=True)
    finished = False
    try:
      fn()
      finished = True
    finally:
      stop.set()
      th.join()
      # Cut (SIGTERM, Ctrl-C, an error): the time to this moment goes into the ledger
      # now, not only up to the last heartbeat (up to HEARTBEAT_S lost a cut, as C27's
      # pauses were, stop 97). A SIGKILL still loses what follows the last beat.
      if finished:
        self.data["stages"][name] = {**spent(), "jobs": jobs}
      self.data["running"] = None if finished else {"stage": name, **spent()}
      self.save()
    print(f"chain: stage {name} done in {self.data['stages'][name]['wall_s'] / 60:.1f} min "
          f"({self.cpu_hours():.2f} CPU-h spent)", file=stream, flush=True)


def module_scores(per_key_csv, column: str = "default") -> dict:
  """module -> its score in `column` ("default" or "policy") of an evaluate per_key.csv
  (any policy's file has the default's column; per-function rows are summed per module)."""
  out = {}
  with open(per_key_csv) as f:
    for r in csv.DictReader(f):
      out[r["module"]] = out.get(r["module"], 0.0) + float(r[column])
  return out


def split_figure(policy_sizes: dict, defaults: dict, held=None) -> dict:
  """Training-split total change (%) and modules more than 1% bigger, over the modules
  both sides have. With `held` (module names), also the figure over those of them in
  "held" ({"modules", "change_pct", "regressed", "largest", "largest_share_pct",
  "without_largest_pct"}; None when none is there). The held set is small, so one big
  module can carry its total (C18: one of 137 modules held 47% of the bytes and 6.4 of
  9.8 points); the figure without its largest module says whether the rest agree."""
  from mlgo.training.rollouts import GreedyFigure  # pylint: disable=import-outside-toplevel
  common = sorted(set(policy_sizes) & set(defaults))
  if not common:
    raise ValueError("no module has both a policy and a default size")
  g = GreedyFigure(defaults)  # the sums a probe round shows while it runs
  for m in common:
    g.add(m, policy_sizes[m])
  fig = {"modules": g.modules, "default": g.default, "policy": g.policy,
         "change_pct": g.change_pct(), "regressed": g.regressed,
         "regressed_pct": 100.0 * g.regressed / g.modules}
  if held is not None:
    sub = {m: policy_sizes[m] for m in common if m in held}
    fig["held"] = None
    if sub:
      h = split_figure(sub, defaults)
      big = max(sub, key=lambda m: (defaults[m], m))
      rest = {m: v for m, v in sub.items() if m != big}
      fig["held"] = {k: h[k] for k in ("modules", "change_pct", "regressed")}
      fig["held"].update(
          largest=big, largest_share_pct=100.0 * defaults[big] / h["default"],
          without_largest_pct=split_figure(rest, defaults)["change_pct"] if rest else None)
  return fig


def held_change(sizes: dict, defaults: dict, held: set, cap: float | None = None) -> float:
  """The held modules' total change (%) vs the default, from per-module sizes. With `cap`
  (a share), each module weighs its default bytes but at most cap x their total: the
  weighted mean of the modules' own changes, so no single module decides the figure."""
  sub = {m: v for m, v in sizes.items() if m in held}
  if cap is None:
    return split_figure(sub, defaults)["change_pct"]
  common = [m for m in sub if defaults.get(m, 0.0) > 0.0]  # an empty module weighs 0
  if not common:
    raise ValueError("no module has both a policy and a default size")
  most = cap * sum(defaults[m] for m in common)
  weight = {m: min(defaults[m], most) for m in common}
  return 100.0 * sum(weight[m] * (sub[m] / defaults[m] - 1.0) for m in common) / sum(
      weight.values())


def held_modules(modules) -> set:
  """The modules whose probes fine-tuning never trains on (probe_tuning's hold-out). No
  round learns from them, so their figure is the chain's own check for overfitting: it
  shows whether what the rounds learn carries to modules they did not probe."""
  from mlgo.training import probe_tuning  # pylint: disable=import-outside-toplevel
  return {m for m in modules if probe_tuning.heldout_module(m)}


def probe_rounds(out) -> list:
  """[(probe dir, the policy dir it probed)] of each round that wrote its probe index, in
  round order: the one walk of the rounds' indexes that the lookups below share."""
  return [(idx.parent, pathlib.Path(json.loads(idx.read_text())["policy"]))
          for idx in sorted(pathlib.Path(out).glob("round-*/probes/index.json"))]


def probed_policies(out, rounds: list | None = None) -> dict:
  """resolved policy dir -> the probe dir of the chain's first round that probed it
  (`rounds`: probe_rounds(out), if the caller has it)."""
  found = {}
  for pdir, policy in probe_rounds(out) if rounds is None else rounds:
    found.setdefault(policy.resolve(), pdir)
  return found


def tuning_rounds(out, r: int, kept: int, by_policy: bool = False) -> list[int]:
  """The rounds whose probes round `r` fine-tunes on: the latest `kept` rounds, or with
  `by_policy` those of the latest `kept` policies probed. A round whose guard kept its
  probed policy (tune_choice.json: "probed") hands the next round the same weights, so
  both rounds' probes are of one policy: samples of the same thing, which a stall would
  otherwise drop after `kept` rounds though the policy has not moved."""
  if not by_policy:
    return list(range(max(1, r - kept + 1), r + 1))
  out, rounds, policies = pathlib.Path(out), [r], 1
  for k in range(r - 1, 0, -1):
    choice = out / f"{ROUND}{k:02d}" / "tune_choice.json"
    stalled = choice.exists() and json.loads(choice.read_text())["chosen"] == "probed"
    policies += 0 if stalled else 1
    if policies > kept:
      break
    rounds.append(k)
  return sorted(rounds)


def round_complete(rdir, complete: set | None = None) -> bool:
  """Whether round dir `rdir` made all its probes. The chain knows from its ledger
  (`complete`: the round numbers whose probe stage is done); a report, which reads no
  ledger, from the round's tuning dir (tuning starts only once the probes are made)."""
  rdir = pathlib.Path(rdir)
  if complete is None:
    return (rdir / "tuned").is_dir()
  return round_number(rdir.name) in complete


def reprobed_sizes(out, policy_dir, complete: set | None = None,
                   rounds: list | None = None) -> dict | None:
  """module -> greedy score of `policy_dir` from a complete probe round (its round number in
  `complete`; None: the rounds whose tuning was made, so their probes were) that probed the
  same policy (spec and weights) from another dir: a last round whose guard kept its probed
  policy goes on with a copy, which needs no evaluation of its own (a greedy compile is
  deterministic; the probe rounds' figures rely on it). None if no such round. `rounds`:
  probe_rounds(out), if the caller has it."""
  from mlgo.training.rollouts import policy_digest  # pylint: disable=import-outside-toplevel

  def digest(d):
    p = policy_io.load_policy(d)
    return policy_digest(p.spec, p.arch.w)
  want = None
  for pdir, probed in reversed(probe_rounds(out) if rounds is None else rounds):
    if not round_complete(pdir.parent, complete):
      continue
    want = want or digest(policy_dir)
    if probed.is_dir() and digest(probed) == want:
      return probe_sizes(pdir)
  return None


def measured_sizes(out, name: str, policy_dir, rounds: list | None = None) -> dict | None:
  """module -> the greedy score of chain policy `name` (dir `policy_dir`): from its own
  evaluation, else from the probe round that probed it or a copy of it (`rounds`:
  probe_rounds(out), read once by callers asking for many policies); None if neither
  is on disk."""
  out = pathlib.Path(out)
  ev = out / f"evaluate-{name}" / "per_key.csv"
  if ev.exists():
    return module_scores(ev, "policy")
  if rounds is None:
    rounds = probe_rounds(out)
  d = probed_policies(out, rounds).get(pathlib.Path(policy_dir).resolve())
  return probe_sizes(d) if d is not None else reprobed_sizes(out, policy_dir, rounds=rounds)


def policy_dirs(out, ledger_data: dict) -> dict:
  """name -> dir of each policy a chain's ledger has measured (the layout run() writes)."""
  out = pathlib.Path(out)
  nxt = ledger_data.get("config", {}).get("next_policy", "tuned")
  dirs = {}
  for name in ledger_data.get("policies", {}):
    if name == "start":
      dirs[name] = out / "start"
    elif name.startswith(TAIL):
      dirs[name] = out / name
    elif name == "ppo":
      best = out / "ppo" / "best_policy"
      dirs[name] = best if best.exists() else out / "ppo" / "policy"
    else:
      dirs[name] = out / name / nxt
  return dirs


def fill_held(out, ledger_data: dict, dirs: dict, defaults: dict, held: set) -> int:
  """Adds the held modules' figure to policies measured before it (or its largest-module
  part) was recorded, from the same sizes on disk; returns how many it filled."""
  n, rounds = 0, None
  for k, fig in ledger_data["policies"].items():
    h = fig.get("held", {})
    if (h is not None and "without_largest_pct" not in h) and k in dirs:
      if rounds is None:
        rounds = probe_rounds(out)
      sizes = measured_sizes(out, k, dirs[k], rounds)
      if sizes is not None:
        fig["held"] = split_figure(sizes, defaults, held)["held"]
        n += 1
  return n


def chain_report(out) -> dict:
  """A chain's ledger data as on disk, running or ended, with the held modules' figure
  filled in where the ledger lacks it. Reads only: the ledger file is not written."""
  out = pathlib.Path(out)
  path = out / "chain.json"
  if not path.exists():
    raise FileNotFoundError(f"{out}: no chain.json; not a probe_chain output dir")
  data = json.loads(path.read_text())
  per_key = out / "default-train" / "per_key.csv"
  if data.get("policies") and per_key.exists():
    defaults = module_scores(per_key)
    fill_held(out, data, policy_dirs(out, data), defaults, held_modules(defaults))
  return data


def largest_modules(out, ledger_data: dict, n: int) -> list:
  """The `n` largest training modules (by the default's size) and each measured policy's
  change on them, in the order the policies were made: [(module, default size, held by
  fine-tuning, {policy name: change %})]. A chain's byte totals ride on a few large
  modules (C20's core-test.cc went from -13.2% to +18.2% between two rounds); this shows
  whether they move steadily or swing. Sizes are those the figures came from."""
  if n < 1:
    raise ValueError(f"largest: the number of modules must be >= 1, not {n}")
  out = pathlib.Path(out)
  defaults = module_scores(out / "default-train" / "per_key.csv")
  held = held_modules(defaults)
  big = sorted(defaults, key=lambda m: (-defaults[m], m))[:n]
  dirs, rounds = policy_dirs(out, ledger_data), probe_rounds(out)
  rows = [(m, defaults[m], m in held, {}) for m in big]
  for k, _ in made_order(ledger_data):
    sizes = measured_sizes(out, k, dirs[k], rounds)
    for m, dft, _, changes in rows:
      if sizes is not None and m in sizes and dft > 0:
        changes[k] = 100.0 * (sizes[m] / dft - 1.0)
  return rows


def made_order(ledger_data: dict) -> list:
  """A ledger's measured policies as (name, figure), in the order made."""
  return sorted(ledger_data.get("policies", {}).items(), key=lambda kv: kv[1]["cpu_hours"])


def policy_lines(ledger_data: dict) -> list:
  """One line a measured policy, in the order made: training figure and the held one."""
  lines, chose = [], held_chose(ledger_data)
  for k, fig in made_order(ledger_data):
    lines.append(f"{k}: training split {fig['change_pct']:+.2f}% ({fig['regressed']} >1% "
                 f"bigger) at {fig['cpu_hours']:.2f} CPU-h{_held_text(fig, chose)}"
                 f"{_choice_part(ledger_data.get('tune_choice', {}).get(k))}")
  return lines


def choice_text(choice: dict) -> str:
  """Which policy a round went on with, among its tunings (choose_tuning's answer)."""
  c = choice["chosen"]
  if choice.get("by") in HELD_SELECT:
    n, before = choice["held_modules"], choice["before"]
    capped = (f", none weighing more than {100 * HELD_CAP:.0f}%"
              if choice["by"] == "held_capped" else "")
    margin = choice.get("margin")
    near = (f" nor within {margin:.2f} points of the chain's best {choice['best']:+.2f}%"
            if margin else "")
    if c == "probed":
      return (f"the probed policy again (no tuning compiled the {n} held modules smaller "
              f"than its {before:+.2f}%{near}{capped})")
    after = choice["after"][str(c)]
    why = (f", within {margin:.2f} points of the chain's best {choice['best']:+.2f}%"
           if margin and after >= before else "")
    return (f"the tuning of seed {c}, the smallest of {len(choice['after'])} on the {n} "
            f"held modules compiled{capped} ({before:+.2f}% -> {after:+.2f}%{why})")
  if c == "probed":
    return (f"the probed policy again (no tuning raised the held-out probe agreement "
            f"{choice['before']:.3f})")
  return (f"the tuning of seed {c}, the best of {len(choice['after'])} (held-out probe "
          f"agreement {choice['before']:.3f} -> {choice['after'][str(c)]:.3f})")


def _choice_part(choice: dict | None) -> str:
  return f"; {choice_text(choice)}" if choice else ""


def held_chose(ledger_data: dict) -> bool:
  """Whether a chain chose its tunings by the held modules' bytes: their figure is then
  part of the selection, no longer a check on it."""
  return ledger_data.get("config", {}).get("tune_select") in HELD_SELECT


def _held_text(fig: dict, chose: bool = False) -> str:
  h = fig.get("held")
  if not h:
    return ""
  text = (f"; the {h['modules']} modules fine-tuning never saw"
          f"{' (they chose its tunings)' if chose else ''}: {h['change_pct']:+.2f}% "
          f"({h['regressed']} >1% bigger)")
  if h.get("without_largest_pct") is not None:
    text += (f", {h['without_largest_pct']:+.2f}% without the largest "
             f"({h['largest_share_pct']:.0f}% of their bytes)")
  return text


def probe_sizes(probe_dir) -> dict:
  """module -> the probed policy's greedy score, from a probe store's index."""
  index = json.loads((pathlib.Path(probe_dir) / "index.json").read_text())
  return {m: float(v["base_size"]) for m, v in index["done"].items()}


def select(policies: dict, max_regressed_pct: float) -> str:
  """The name of the policy kept: the lowest training-split total among those with at
  most max_regressed_pct of modules more than 1% bigger; if none qualifies, the fewest
  regressed (then the lowest total)."""
  if not policies:
    raise ValueError("no measured policy to select from")
  ok = {k: v for k, v in policies.items() if v["regressed_pct"] <= max_regressed_pct}
  if ok:
    return min(ok, key=lambda k: (ok[k]["change_pct"], ok[k]["regressed"]))
  return min(policies, key=lambda k: (policies[k]["regressed"], policies[k]["change_pct"]))


# The last policy's own training-split evaluation, as a share of a probe round: it is one
# greedy compile a module, and a round makes that compile plus its flip compiles (stop 42's
# packed chain: 0.11 CPU-h against 0.42 a round).
EVAL_SHARE = 0.25


TUNE_SELECT = ("agreement", "held_bytes", "held_capped")
HELD_SELECT = ("held_bytes", "held_capped")  # those that compile the held modules
# held_capped: no held module weighs more than this share of the held bytes.
HELD_CAP = 0.05


def choose_tuning(tries: dict, guard: bool, by: str = "agreement", margin: float = 0.0,
                  best: float | None = None) -> dict:
  """Of a round's fine-tunings ({seed: (the probed policy's measure, the tuning's)}), the
  best (the lowest seed on a tie); with `guard`, "probed" (the probed policy goes on
  untuned) unless that is strictly better than the probed policy, or (a held select,
  `margin` > 0) at most `margin` points above `best`, the smallest held figure of the
  chain's policies so far (the probed policy's when not given). by "agreement": the
  held-out probe agreement, higher is better; by "held_bytes" or "held_capped": the held
  modules' change (%) vs the default compiled greedily (capped: held_change with
  HELD_CAP), lower is better, None for a tuning whose compile of some held module failed
  (it is never chosen while another is not None)."""
  if by not in TUNE_SELECT:
    raise ValueError(f"by must be one of {', '.join(TUNE_SELECT)}, not {by!r}")
  if by == "agreement":
    seed = min(tries, key=lambda s: (-tries[s][1], s))
  else:
    seed = min(tries, key=lambda s: (tries[s][1] is None, tries[s][1] or 0.0, s))
  before, after = tries[seed]
  if margin and by == "agreement":
    raise ValueError("a guard margin is in points of the held modules' figure: "
                     f"by must be one of {', '.join(HELD_SELECT)}, not 'agreement'")
  better = after is not None and (after > before if by == "agreement" else after < before)
  best = before if best is None else min(best, before)
  near = bool(margin) and after is not None and after <= best + margin
  chosen = "probed" if guard and not (better or near) else seed
  out = {"chosen": chosen, "before": before,
         "after": {str(s): a for s, (_, a) in sorted(tries.items())}}
  if by != "agreement":
    out["by"] = by
  if margin:
    out.update(margin=margin, best=best)
  return out


def round_fits(spent: float, per_round: float, budget: float, evaluations: int = 1) -> bool:
  """Whether one more round and the evaluations after it (the policy it makes; with a
  tail average, that average's too) end within the budget (CPU-h), so the chain's total,
  evaluations included, stays under it."""
  return spent + per_round * (1 + EVAL_SHARE * evaluations) <= budget


# The name of a tail average: TAIL + first and last round averaged ("tail-09-14").
TAIL = "tail-"
ROUND = "round-"


def round_number(name: str) -> int:
  """The round a policy name stands for ("round-07" -> 7); 0 for any other policy."""
  return int(name[len(ROUND):]) if name.startswith(ROUND) else 0


def tail_members(dirs: dict, k: int) -> list:
  """The last k rounds' policy names among a chain's policies (`dirs`, in order made)."""
  rounds = [n for n in dirs if n.startswith(ROUND)]
  return rounds[-k:] if k >= 2 and len(rounds) >= 2 else []


def plot(ledger_data: dict, path):
  """One chain's figures against CPU-hours, each policy named (DIR/chain.png)."""
  compare_plot({"chain": ledger_data}, path, annotate=True)


def compare_plot(chains: dict, path, target: float | None = None,
                 budget: float | None = None, annotate: bool = False):
  """Chains on one plot (label -> ledger data): each one's training-split figure (solid)
  and its held modules' figure (dashed, same colour; where the two part, the rounds
  overfit) against CPU-hours, the kept policy starred; `target` (%) and `budget` (CPU-h)
  as grey lines; `annotate` names each policy."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  fig, ax = plt.subplots(figsize=(7, 4.5))
  for i, (label, data) in enumerate(chains.items()):
    colour = f"C{i % 10}"
    pol = [p for _, p in made_order(data)]
    ax.plot([p["cpu_hours"] for p in pol], [p["change_pct"] for p in pol], "o-",
            color=colour, label=f"{label}: training split")
    if annotate:
      for k, p in data["policies"].items():
        ax.annotate(k, (p["cpu_hours"], p["change_pct"]), textcoords="offset points",
                    xytext=(4, 4), fontsize=8)
    held = [p for p in pol if p.get("held")]
    if held:
      ax.plot([p["cpu_hours"] for p in held], [p["held"]["change_pct"] for p in held],
              "s--", color=colour, alpha=0.7,
              label=f"{label}: modules fine-tuning never saw"
              f"{' (chose tunings)' if held_chose(data) else ''}")
    sel = data.get("selected")
    if sel:
      p = data["policies"][sel]
      ax.plot([p["cpu_hours"]], [p["change_pct"]], "*", color=colour, markersize=14,
              markeredgecolor="black", label=f"{label}: kept {sel}")
  if target is not None:
    ax.axhline(target, color="grey", ls=":", lw=1)
  if budget is not None:
    ax.axvline(budget, color="grey", ls=":", lw=1)
  ax.axhline(0.0, color="grey", lw=0.5)
  ax.set_xlabel("CPU-hours (wall x workers)")
  ax.set_ylabel(".text change vs default (%)")
  ax.set_title("probe chains (star: kept policy)")
  ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def run(cfg: ChainConfig, stream=sys.stderr) -> dict:
  """Runs (or resumes) the chain; returns the ledger's data."""
  from mlgo.training import bc, probe_tuning, rollouts, trace  # pylint: disable=import-outside-toplevel
  cfg.check()
  widen = False
  if cfg.start:  # a bad start fails before anything is compiled, naming the dir
    got = policy_io.load_policy(cfg.start).problem
    if got != cfg.problem:
      # A policy of a narrower problem (e.g. inlining_ir2vec for inlining_ir2vec_ctx)
      # starts the chain widened: it decides as before, the new inputs at zero weight.
      narrow = [f.name for f in get_problem(got).features]
      wide = [f.name for f in get_problem(cfg.problem).features]
      if wide[:len(narrow)] != narrow or len(wide) == len(narrow):
        raise ValueError(f"{cfg.start}: a policy for {got!r}; this chain trains "
                         f"{cfg.problem!r}, whose features do not extend {got!r}'s")
      widen = True
  out = pathlib.Path(cfg.output)
  out.mkdir(parents=True, exist_ok=True)
  led = Ledger(out / "chain.json", cfg)
  quiet = open(out / "stages.log", "a")  # the tools' own summaries, kept for reading

  def measure(name, sizes, round_no):
    fig = split_figure(sizes, defaults, held)
    # cpu_hours: what the chain had spent when this policy was made (its figure is read
    # later, from the next round's greedy compiles).
    fig.update(round=round_no, cpu_hours=led.data["made_at"][name])
    led.data["policies"][name] = fig
    led.save()
    print(f"chain: {name}: training split {fig['change_pct']:+.2f}% "
          f"({fig['regressed']} of {fig['modules']} modules >1% bigger) at "
          f"{fig['cpu_hours']:.2f} CPU-h{_held_text(fig, held_chose(led.data))}",
          file=stream, flush=True)

  # The default's size of every training module (evaluate's cache: usually no compile).
  led.run("default", lambda: evaluate(
      cfg.problem, cfg.corpus, "default", out / "default-train", split="train",
      jobs=cfg.jobs, timeout=cfg.timeout, stream=quiet), cfg.jobs, stream)
  defaults = module_scores(out / "default-train" / "per_key.csv")
  held = held_modules(defaults)
  by_held = held_chose(led.data)  # the round's tunings are chosen by the held modules' bytes
  cap = HELD_CAP if cfg.tune_select == "held_capped" else None
  if by_held and not held:
    raise ValueError(f"{cfg.corpus}: tune_select={cfg.tune_select} compiles the training modules "
                     f"fine-tuning holds out (about 1 in 10, by name), and none of its "
                     f"{len(defaults)} is held out")

  start = out / "start"
  deferral = derived.parse_deferral(cfg.defer)
  # With a deferral, the start is made from `base` (the given, cloned or widened policy).
  base = out / "start-base" if cfg.defer else start
  if cfg.start and not widen:
    if not base.exists():
      files.replace_dir_with_copy(cfg.start, base)  # a cut copy is made again
  else:
    # A behavioral clone of the default: the start itself, or (widening) the source of
    # the new features' normalization.
    clone_dir = out / "clone" if widen else base
    def make_trace():
      shutil.rmtree(out / "trace", ignore_errors=True)  # a cut trace is made again
      trace.generate_default_trace(cfg.corpus, cfg.problem, out / "trace",
                                   sampling_rate=cfg.trace_sampling, jobs=cfg.jobs,
                                   timeout=cfg.timeout, seed=cfg.seed, split="train")
    led.run("trace", make_trace, cfg.jobs, stream)

    def clone():
      shutil.rmtree(clone_dir, ignore_errors=True)  # a cut clone is made again
      bc.train_bc(out / "trace", clone_dir, epochs=cfg.bc_epochs, seed=cfg.seed)
    led.run("bc", clone, cfg.jobs, stream)
    if widen and not base.exists():
      shutil.rmtree(out / "start.tmp", ignore_errors=True)
      derived.widen_policy(cfg.start, clone_dir, out / "start.tmp")
      (out / "start.tmp").rename(base)
  if cfg.defer:
    def defer():
      shutil.rmtree(out / "start.tmp", ignore_errors=True)  # a cut copy is made again
      derived.with_deferral(base, out / "start.tmp", **deferral)
      shutil.rmtree(start, ignore_errors=True)
      (out / "start.tmp").rename(start)
    led.run("defer", defer, cfg.jobs, stream)
  led.data["made_at"].setdefault("start", led.cpu_hours())

  dirs = {"start": start}  # policy name -> its dir
  policy, name = start, "start"
  if cfg.ppo_iterations:
    def train_ppo():
      from mlgo.training import cli, ppo  # pylint: disable=import-outside-toplevel
      cli.parse_and_bind_gin([cfg.ppo_gin], [f"PPOConfig.jobs={cfg.jobs}",
                                             f"PPOConfig.compile_timeout={cfg.timeout}"])
      trace_dir = out / "trace"
      ppo.Trainer(cfg.corpus, out / "ppo", problem_name=cfg.problem, warmstart=start,
                  trace=trace_dir if trace_dir.exists() else None, stream=stream
                  ).run(cfg.ppo_iterations)
    led.run("ppo", train_ppo, cfg.jobs, stream)
    best = out / "ppo" / "best_policy"
    policy, name = (best if best.exists() else out / "ppo" / "policy"), "ppo"
    dirs[name] = policy
    led.data["made_at"].setdefault(name, led.cpu_hours())
  for r in range(1, cfg.rounds + 1):
    rdir = out / f"round-{r:02d}"
    nxt = rdir / cfg.next_policy
    if not led.done(f"probe-{r}"):
      spent = led.cpu_hours()
      rounds_done = [led.data["stages"][k] for k in led.data["stages"]
                     if k.startswith(("probe-", "tune-", "average-"))]
      per_round = sum(s["cpu_hours"] for s in rounds_done) / max(r - 1, 1)
      evals = 2 if cfg.tail_average else 1
      if cfg.cpu_hours is not None and r > 1 and not round_fits(spent, per_round,
                                                                 cfg.cpu_hours, evals):
        print(f"chain: round {r} and its policy's evaluation would end past the budget "
              f"({spent:.2f} + ~{per_round:.2f} x {1 + EVAL_SHARE * evals} CPU-h of "
              f"{cfg.cpu_hours}); stopping rounds", file=stream, flush=True)
        break
    led.run(f"probe-{r}", lambda p=policy, d=rdir, r=r: rollouts.probe_corpus(
        cfg.corpus, p, d / "probes", split="train", max_probes=cfg.max_probes,
        random_fraction=cfg.random_fraction, jobs=cfg.jobs, timeout=cfg.timeout,
        seed=cfg.seed + r, credit_kind=cfg.credit,
        flips_per_compile=cfg.flips_per_compile, flip_compiles=cfg.flip_compiles,
        default_sizes=defaults, greedy_cache=out / GREEDY_CACHE,
        callee_groups=cfg.callee_groups, stream=stream),
        cfg.jobs, stream)
    if name not in led.data["policies"]:
      measure(name, probe_sizes(rdir / "probes"), r - 1)
    kept = [out / f"round-{k:02d}" / "probes"
            for k in tuning_rounds(out, r, cfg.probe_rounds_kept, cfg.keep_stalled_probes)]

    def compiled_held_change(policy_dir, eval_dir, over: set):
      """The change (%) of the held modules in `over` compiled greedily by `policy_dir`;
      None if one of them failed (the totals would cover different modules)."""
      evaluate(cfg.problem, cfg.corpus, policy_dir, eval_dir, split="train", jobs=cfg.jobs,
               timeout=cfg.timeout, stream=quiet, modules=sorted(held))
      sizes = module_scores(pathlib.Path(eval_dir) / "per_key.csv", "policy")
      return held_change(sizes, defaults, over, cap) if over <= set(sizes) else None

    def tune(p=policy, d=rdir, kept=kept, r=r):
      best = ([out / f"round-{k:02d}" / "probes" for k in range(1, r + 1)]
              if cfg.anchors == "best" else None)
      tries = {}
      # One tuning and no guard: it is the round's policy (written as "tuned" directly).
      choose = cfg.tune_seeds > 1 or cfg.tune_guard
      if by_held:  # the probed policy's figure, over the held modules its probe round has
        probed = probe_sizes(d / "probes")
        probed_held, over = held_change(probed, defaults, held, cap), held & set(probed)
      for seed in range(cfg.seed, cfg.seed + cfg.tune_seeds):
        td = d / (f"tuned-seed{seed}" if choose else "tuned")
        shutil.rmtree(td, ignore_errors=True)
        m = probe_tuning.train_on_probes(p, kept, td, seed=seed,
                                         regression_penalty=cfg.regression_penalty,
                                         default_sizes=defaults, best_anchor_dirs=best,
                                         weighting=cfg.weighting_for(r), stream=quiet)
        tries[seed] = (m["before"]["heldout_probe"][0], m["after"]["heldout_probe"][0])
        text = f"held-out probe agreement {tries[seed][0]:.3f} -> {tries[seed][1]:.3f}"
        if by_held:
          tries[seed] = (probed_held, compiled_held_change(td, d / f"held-seed{seed}", over))
          shown = "a failed compile" if tries[seed][1] is None else f"{tries[seed][1]:+.2f}%"
          text += (f"; the {len(held)} held modules compiled: {tries[seed][0]:+.2f}% -> "
                   f"{shown}")
        print(f"chain: fine-tuned on {len(kept)} round(s) of probes (seed {seed}): {text}",
              file=stream, flush=True)
      if choose:
        # The smallest held figure of the policies the chain went on with: each was
        # the probed policy of the round after it (its "before").
        best = min((c["before"] for c in led.data.get("tune_choice", {}).values()
                    if c.get("by") == cfg.tune_select), default=None)
        choice = choose_tuning(tries, cfg.tune_guard, cfg.tune_select,
                               margin=cfg.tune_guard_margin, best=best)
        if by_held:
          choice["held_modules"] = len(held)
        src = p if choice["chosen"] == "probed" else d / f"tuned-seed{choice['chosen']}"
        files.replace_dir_with_copy(src, d / "tuned")
        files.write_json_atomic(d / "tune_choice.json", choice, indent=1)
        print(f"chain: round {r} goes on with {choice_text(choice)}", file=stream, flush=True)
    led.run(f"tune-{r}", tune, cfg.jobs, stream)
    if (rdir / "tune_choice.json").exists():  # the ledger says which tuning went on
      led.data.setdefault("tune_choice", {})[f"round-{r:02d}"] = json.loads(
          (rdir / "tune_choice.json").read_text())
      led.save()
    if cfg.next_policy == "average":
      led.run(f"average-{r}", lambda p=policy, d=rdir: derived.average_policies(
          [p, d / "tuned"], d / "average",
          weights=[1.0 - cfg.weight_for(r), cfg.weight_for(r)]), cfg.jobs, stream)
    policy, name = nxt, f"round-{r:02d}"
    dirs[name] = policy
    led.data["made_at"].setdefault(name, led.cpu_hours())

  shutil.rmtree(out / GREEDY_CACHE, ignore_errors=True)  # only the rounds reuse it

  def evaluate_and_measure(name, policy_dir, round_no):
    """A policy no probe round compiled greedily: its own training-split evaluation (a
    counted stage) gives its figure."""
    led.run(f"evaluate-{name}", lambda: evaluate(
        cfg.problem, cfg.corpus, policy_dir, out / f"evaluate-{name}", split="train",
        jobs=cfg.jobs, timeout=cfg.timeout, stream=quiet), cfg.jobs, stream)
    measure(name, module_scores(out / f"evaluate-{name}" / "per_key.csv", "policy"),
            round_no)

  if name not in led.data["policies"]:
    # The last round kept its probed policy: its figure is that probe round's (0.17 CPU-h
    # of a whole evaluation in C27, stop 97).
    again = reprobed_sizes(out, policy, {k for k in range(1, cfg.rounds + 1)
                                         if led.done(f"probe-{k}")})
    if again is not None:
      print(f"chain: {name} is the policy a probe round compiled: its figure is that "
            f"round's, no evaluation", file=stream, flush=True)
      measure(name, again, round_number(name))
    else:
      evaluate_and_measure(name, policy, round_number(name))

  members = tail_members(dirs, cfg.tail_average)
  if members:
    tail = f"{TAIL}{members[0][len(ROUND):]}-{members[-1][len(ROUND):]}"
    tail_dir = out / tail

    def merge():
      shutil.rmtree(tail_dir, ignore_errors=True)  # a cut average is made again
      derived.average_policies([dirs[m] for m in members], tail_dir)
    led.run(f"make-{tail}", merge, 1, stream)
    dirs[tail] = tail_dir
    led.data["made_at"].setdefault(tail, led.cpu_hours())
    if tail not in led.data["policies"]:
      evaluate_and_measure(tail, tail_dir, round_number(members[-1]))

  # Chains measured before the held-out figure was recorded get it from the same sizes.
  fill_held(out, led.data, dirs, defaults, held)
  # Candidates: the policies of this chain as configured (a rerun with fewer rounds
  # leaves later rounds' figures in the ledger, not in the choice).
  sel = select({k: v for k, v in led.data["policies"].items() if k in dirs},
               cfg.max_regressed_pct)
  led.data["selected"] = sel
  led.data["cpu_hours"] = led.cpu_hours()
  src = dirs[sel]
  shutil.rmtree(out / "policy", ignore_errors=True)
  shutil.copytree(src, out / "policy")
  led.save()
  plot(led.data, out / "chain.png")
  for line in policy_lines(led.data):
    print(f"chain: {line}", file=stream)
  p = led.data["policies"][sel]
  print(f"chain: kept {sel}: training split {p['change_pct']:+.2f}% ({p['regressed']} "
        f"modules >1% bigger); {led.cpu_hours():.2f} CPU-h in all; wrote {out / 'policy'}",
        file=stream, flush=True)
  quiet.close()
  return led.data
