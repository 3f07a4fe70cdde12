"""Policy-in-the-loop overhead: compile time with a policy answering over the channel
divided by the plain compile time of the same module (inlining: clang -cc1 at the
corpus' -O level; eviction: llc on the module's optimized bitcode), plus decisions per
second and where the per-decision time goes (read = waiting for and decoding the next
observation, which includes the compiler's own work; policy; write).

The floor: the same compile answered by //cc/channel_floor:floor_responder (native, does
nothing but answer the default), i.e. what stock clang/llc's interactive mode costs by
itself (the ML advisor's feature computation, the pipe round trips), before any policy.

Timing: per module and mode the minimum of `repeats` runs, modes interleaved so machine
noise hits all of them alike; ratios are of the summed minima.
"""
import dataclasses
import resource
import os
import pathlib
import shutil
import subprocess
import tempfile
import time
from typing import Optional

from mlgo.env import core, modules as modules_lib
from mlgo.env.policies import DefaultPolicy, MLPPolicy, ShadowPolicy
from mlgo.problems import get_problem, inlining as inlining_problem
from mlgo.util import cli
from mlgo.util import toolchain as toolchain_lib
from mlgo.util.progress import Progress


@dataclasses.dataclass
class ProblemBench:
  problem: str
  modules: int = 0
  failed: int = 0
  plain_s: float = 0.0
  mlp_s: float = 0.0
  trained_s: float = 0.0      # a trained MLP deciding (only with trained_policy)
  floor_s: float = 0.0        # native floor_responder answering the default (0: not run)
  trained_name: str = ""
  default_s: float = 0.0
  shadow_s: float = 0.0
  plain_cpu: float = 0.0
  mlp_cpu: float = 0.0
  shadow_cpu: float = 0.0
  decisions: int = 0
  corrections: int = 0
  profile: dict = dataclasses.field(default_factory=dict)

  @property
  def mlp_ratio(self):
    return self.mlp_s / self.plain_s if self.plain_s else float("nan")

  def cpu_ratio(self, what):
    return getattr(self, what + "_cpu") / self.plain_cpu if self.plain_cpu else float("nan")

  @property
  def trained_ratio(self):
    return self.trained_s / self.plain_s if self.plain_s and self.trained_s else float("nan")

  @property
  def floor_ratio(self):
    return self.floor_s / self.plain_s if self.plain_s and self.floor_s else float("nan")

  @property
  def shadow_ratio(self):
    return self.shadow_s / self.plain_s if self.plain_s else float("nan")

  @property
  def default_ratio(self):
    return self.default_s / self.plain_s if self.plain_s else float("nan")

  def report(self) -> str:
    per = {k: v / self.decisions * 1e6 for k, v in self.profile.items()} if self.decisions else {}
    dps = self.decisions / self.mlp_s if self.mlp_s else 0.0
    return (f"{self.problem}: {self.modules} modules ({self.failed} failed), "
            f"{self.decisions} decisions, {self.corrections} corrections\n"
            f"  plain {self.plain_s:.2f}s, MLP policy {self.mlp_s:.2f}s, "
            f"MLP computed/default answered {self.shadow_s:.2f}s, "
            f"default replay {self.default_s:.2f}s\n"
            + (f"  floor: native responder answering the default {self.floor_s:.2f}s: "
               f"{self.floor_ratio:.3f}x plain (the compiler's own interactive-mode cost; "
               f"python default replay is {self.default_s / self.floor_s:.3f}x the floor)\n"
               if self.floor_s else "")
            + (f"  trained MLP ({self.trained_name}) deciding {self.trained_s:.2f}s: "
               f"{self.trained_ratio:.3f}x plain\n" if self.trained_name else "")
            + f"  time over plain: random MLP deciding {self.mlp_ratio:.3f}x; MLP computed but "
            f"default answered {self.shadow_ratio:.3f}x (pure channel+policy overhead); "
            f"default replay {self.default_ratio:.3f}x\n"
            f"  CPU time (compiler + driver) over plain: MLP deciding "
            f"{self.cpu_ratio('mlp'):.3f}x; MLP computed but default answered "
            f"{self.cpu_ratio('shadow'):.3f}x\n"
            f"  decisions/s (MLP, whole compile): {dps:,.0f}\n"
            f"  per decision: " + ", ".join(f"{k} {v:.1f}us" for k, v in sorted(per.items())))


def _cpu() -> float:
  """CPU seconds of this process plus its waited-for children so far."""
  a = resource.getrusage(resource.RUSAGE_SELF)
  b = resource.getrusage(resource.RUSAGE_CHILDREN)
  return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def _timed_run(argv):
  c, t = _cpu(), time.perf_counter()
  subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  return time.perf_counter() - t, _cpu() - c


def _timed_compile(*a, **k):
  c = _cpu()
  r = core.compile_module(*a, **k)
  return r, _cpu() - c


def bench_problem(problem: str, mods, *, llvm_version: int, repeats: int, workdir: str,
                  seed: int = 0, stream=None, trained_policy=None,
                  trained_name: str = "") -> ProblemBench:
  """trained_policy: optional second policy (e.g. a shipped model) timed deciding too: a
  random MLP takes decisions no trained policy would (it inlines far more), so its time
  mixes loop overhead with a different compile; a trained policy shows the realistic case.
  """
  tc = toolchain_lib.toolchain(llvm_version)
  out = ProblemBench(problem, trained_name=trained_name if trained_policy else "")
  responder = floor_responder_path()
  mlp = MLPPolicy(problem, seed=seed)
  shadow = ShadowPolicy(MLPPolicy(problem, seed=seed), problem)
  obj = os.path.join(workdir, "plain.o")
  prog = Progress(f"bench {problem}", total=len(mods), stream=stream)
  llc = get_problem(problem).tool == "llc"
  for m in mods:
    if llc:
      try:
        m = modules_lib.llc_input(m, workdir, tc.clang)
      except RuntimeError:
        out.failed += 1
        prog.update()
        continue
      m = modules_lib.LlcModule(m.name, _keep(m.bc_path, workdir, out.modules), m.llc_flags)
      plain_argv = m.llc_argv(tc.llc, obj)
    else:
      plain_argv = m.compile_argv(tc.clang, obj)
    best = {"plain": float("inf"), "mlp": float("inf"), "default": float("inf"),
            "shadow": float("inf"), "trained": float("inf"), "floor": float("inf")}
    cpu = {"plain": float("inf"), "mlp": float("inf"), "shadow": float("inf")}
    res_mlp = None
    prof_best = None
    ok = True
    for _ in range(repeats):
      wall, c = _timed_run(plain_argv)
      best["plain"], cpu["plain"] = min(best["plain"], wall), min(cpu["plain"], c)
      prof = {}
      r, c = _timed_compile(m, problem, mlp, llvm_version=llvm_version, profile=prof)
      cpu["mlp"] = min(cpu["mlp"], c)
      if not r.ok:
        ok = False
        break
      if r.seconds < best["mlp"]:
        best["mlp"], res_mlp, prof_best = r.seconds, r, prof
      d = core.compile_module(m, problem, DefaultPolicy(problem), llvm_version=llvm_version)
      if not d.ok:
        ok = False
        break
      best["default"] = min(best["default"], d.seconds)
      sh, c = _timed_compile(m, problem, shadow, llvm_version=llvm_version)
      cpu["shadow"] = min(cpu["shadow"], c)
      if not sh.ok:
        ok = False
        break
      best["shadow"] = min(best["shadow"], sh.seconds)
      if responder:
        f = floor_compile(m, problem, llvm_version=llvm_version, responder=responder)
        if f is None:
          ok = False
          break
        best["floor"] = min(best["floor"], f)
      if trained_policy is not None:
        t = core.compile_module(m, problem, trained_policy, llvm_version=llvm_version)
        if not t.ok:
          ok = False
          break
        best["trained"] = min(best["trained"], t.seconds)
    prog.update()
    if not ok:
      out.failed += 1
      continue
    out.modules += 1
    out.plain_s += best["plain"]
    out.mlp_s += best["mlp"]
    out.default_s += best["default"]
    out.shadow_s += best["shadow"]
    if trained_policy is not None:
      out.trained_s += best["trained"]
    if responder:
      out.floor_s += best["floor"]
    for k in cpu:
      setattr(out, k + "_cpu", getattr(out, k + "_cpu") + cpu[k])
    out.decisions += res_mlp.decisions
    out.corrections += res_mlp.corrections
    for k, v in prof_best.items():
      out.profile[k] = out.profile.get(k, 0.0) + v
  prog.close()
  return out


def floor_responder_path() -> Optional[str]:
  """The built //cc/channel_floor:floor_responder, or None."""
  found = cli.built_file("cc/channel_floor/floor_responder")
  return str(found) if found else None


def floor_compile(module, problem: str, *, llvm_version: int, responder: str,
                  timeout: float = 300.0, output_path: Optional[str] = None) -> Optional[float]:
  """Wall seconds of one compile with floor_responder answering the default decision
  (inlining: the compiler's own; eviction: the environment's default-equivalent column;
  priority: 0); None if either side fails."""
  if problem == "inlining":
    answer = f"--answer_feature={inlining_problem.default_slot(llvm_version)}"
  elif problem == "regalloc_eviction":
    answer = "--eviction_default"
  else:
    answer = "--answer_constant=0"
  with tempfile.TemporaryDirectory(prefix="mlgo-floor-") as tmp:
    base = os.path.join(tmp, "channel")
    os.mkfifo(base + ".in", 0o600)
    os.mkfifo(base + ".out", 0o600)
    argv, obj = core.channel_argv(module, problem, base, tmp, llvm_version=llvm_version)
    t = time.perf_counter()
    comp = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    resp = subprocess.Popen([responder, f"--channel_base={base}", answer],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rc = rr = None
    try:
      rc = comp.wait(timeout)
      # A compiler that failed may never have opened the channel, where the responder
      # still waits; one that succeeded has closed it, so the responder ends at once.
      rr = resp.wait(10.0) if rc == 0 else None
    except subprocess.TimeoutExpired:
      pass
    elapsed = time.perf_counter() - t
    for p in (comp, resp):
      if p.poll() is None:
        p.kill()
        p.wait()
    if rc != 0 or rr != 0:
      return None
    if output_path:
      shutil.copyfile(obj, output_path)
  return elapsed


def _keep(bc_path: str, workdir: str, i: int) -> str:
  dst = os.path.join(workdir, f"opt{i}.bc")
  os.replace(bc_path, dst)
  return dst


def pick_modules(n: int, llvm_version: int, corpus_path=None, stream=None):
  """(description, modules): n modules spread over the corpus (default corpus if built,
  else the testdata programs)."""
  from mlgo import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
  path = pathlib.Path(corpus_path) if corpus_path else None
  if path is None:
    from mlgo.corpus import build  # pylint: disable=import-outside-toplevel
    d = build.default_corpus_dir(llvm_version)
    if (d / "corpus_description.json").exists():
      path = d
  if path is not None:
    c = corpus_lib.load_corpus(path)
    mods = sorted(c.modules, key=lambda m: m.name)
    step = max(1, len(mods) // n) if n else 1
    picked = mods[::step][:n] if n else mods
    return f"{path} ({len(picked)} of {len(mods)} modules)", picked
  root = cli.repo_root()
  progs = sorted((root / "testdata" / "programs").glob("*.c"))
  tmp = tempfile.mkdtemp(prefix="mlgo-bench-src-")
  from mlgo.env.modules import module_from_source  # pylint: disable=import-outside-toplevel
  return ("testdata/programs", [module_from_source(str(p), tmp, llvm_version=llvm_version)
                                for p in progs])
