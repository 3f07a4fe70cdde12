"""Release-mode overhead, measured side by side in one run:

- clang-22 -Oz with the inline advisor plugin vs plain clang-22 -Oz (goal <= 1.02x),
- llc-22 with the advisor server on the eviction channel vs plain llc-22 (goal <= 1.15x),
- the plugin's size and the model's share of it.

The plugin is also timed with MLGO_INLINE_FOLLOW_DEFAULT=1 (model evaluated, LLVM's
heuristic decides): that separates the advisor's own cost from the effect of different
inlining on the rest of the pipeline. It is an upper bound (the heuristic's answer costs
one more analysis per call site) and not an exact replay: MLInlineAdvisor handles a few
cases (unreachable call sites, deferral) unlike the default advisor, so objects mostly,
not always, equal plain clang's.

Each module is compiled `reps` times in each configuration, alternating, and the fastest
run counts (the machine is shared; the minimum is the least noisy estimate). Both wall
time and the children's CPU time (user+sys, which includes the server's) are reported.
"""
import dataclasses
import os
import pathlib
import random
import resource
import subprocess
import tempfile
import time

from mlgo.export import server as srv
from mlgo.util.progress import Progress
from mlgo.util.toolchain import text_size, toolchain


def _children_cpu() -> float:
  r = resource.getrusage(resource.RUSAGE_CHILDREN)
  return r.ru_utime + r.ru_stime


def _timed(fn):
  c0, t0 = _children_cpu(), time.perf_counter()
  ok = fn()
  return ok, time.perf_counter() - t0, _children_cpu() - c0


@dataclasses.dataclass
class Pair:
  module: str
  base_wall: float
  base_cpu: float
  new_wall: float
  new_cpu: float


def _summary(pairs: list[Pair]) -> dict:
  bw = sum(p.base_wall for p in pairs)
  nw = sum(p.new_wall for p in pairs)
  bc = sum(p.base_cpu for p in pairs)
  nc = sum(p.new_cpu for p in pairs)
  return {"modules": len(pairs), "base_wall_s": bw, "new_wall_s": nw,
          "wall_ratio": nw / bw if bw else float("nan"), "base_cpu_s": bc, "new_cpu_s": nc,
          "cpu_ratio": nc / bc if bc else float("nan")}


def _sample(corpus, n: int, seed: int):
  mods = [m for m in corpus.modules if m.language == "c" or m.language == "c++"]
  rng = random.Random(seed)
  rng.shuffle(mods)
  return sorted(mods[:n], key=lambda m: m.name)


def bench_plugin(plugin: str, modules: int = 20, reps: int = 3, seed: int = 0,
                 llvm_version: int = 22, progress: bool = True) -> dict:
  from mlgo import corpus as corpus_mod  # pylint: disable=import-outside-toplevel
  corpus = corpus_mod.load_corpus(corpus_mod.default_corpus(llvm_version, opt="Oz"))
  clang = toolchain(llvm_version).clang
  mods = _sample(corpus, modules, seed)
  pairs, failures, follow = [], [], []
  text_base = text_new = 0
  prog = Progress("bench plugin", len(mods)) if progress else None
  with tempfile.TemporaryDirectory() as d:
    out = os.path.join(d, "o.o")
    for m in mods:
      base = m.compile_argv(clang, out)
      new = m.compile_argv(clang, out, [f"-fpass-plugin={plugin}"])
      fd_env = dict(os.environ, MLGO_INLINE_FOLLOW_DEFAULT="1")
      run = lambda argv, env=None: subprocess.run(
          argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env).returncode == 0
      b, n, f = [], [], []
      for _ in range(reps):
        b.append(_timed(lambda: run(base)))
        n.append(_timed(lambda: run(new)))
        f.append(_timed(lambda: run(new, fd_env)))
      if all(x[0] for x in b + n + f):
        # Sizes of the objects each configuration produces (last run of each).
        run(base)
        text_base += text_size(out)
        run(new)
        text_new += text_size(out)
      if not all(x[0] for x in b + n + f):
        failures.append(m.name)
      else:
        pairs.append(Pair(m.name, min(x[1] for x in b), min(x[2] for x in b),
                          min(x[1] for x in n), min(x[2] for x in n)))
        follow.append(Pair(m.name, min(x[1] for x in b), min(x[2] for x in b),
                           min(x[1] for x in f), min(x[2] for x in f)))
      if prog:
        prog.update(failed=int(m.name in failures))
  if prog:
    prog.close()
  res = _summary(pairs)
  res["follow_default"] = _summary(follow)
  res["text_bytes_plain"] = text_base
  res["text_bytes_plugin"] = text_new
  res["failures"] = failures
  res["plugin_bytes"] = os.path.getsize(plugin)
  return res


def bench_server(server: str, problem: str = "regalloc_eviction", modules: int = 20,
                 reps: int = 3, seed: int = 0, llvm_version: int = 22,
                 progress: bool = True) -> dict:
  from mlgo import corpus as corpus_mod  # pylint: disable=import-outside-toplevel
  corpus = corpus_mod.load_corpus(corpus_mod.default_corpus(llvm_version, opt="O2"))
  tc = toolchain(llvm_version)
  mods = _sample(corpus, modules, seed)
  pairs, failures = [], []
  decisions = 0
  prog = Progress("bench server", len(mods)) if progress else None
  with tempfile.TemporaryDirectory() as d:
    for m in mods:
      bc = os.path.join(d, "m.bc")
      # Optimized bitcode: what llc sees inside clang at -O2.
      r = subprocess.run(m.compile_argv(tc.clang, bc, action="-emit-llvm-bc"),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
      if r.returncode != 0:
        failures.append(f"{m.name}: clang -emit-llvm-bc failed")
        continue
      obj = os.path.join(d, "m.o")
      llc = [tc.llc, "-O2", "-filetype=obj", bc, "-o", obj]
      plain = lambda: subprocess.run(llc, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL).returncode == 0
      last = {}

      def served():
        res = srv.run_with_server(server, problem, lambda f: llc + f, timeout=600)
        last["run"] = res
        return res.ok
      b, n = [], []
      for _ in range(reps):
        b.append(_timed(plain))
        n.append(_timed(served))
      if not all(x[0] for x in b + n):
        run = last.get("run")
        why = run.reason if run and not run.ok else "plain llc failed"
        tail = (run.compiler_stderr.strip().splitlines() or [""])[-1] if run else ""
        failures.append(f"{m.name}: {why} {tail[:200]}")
      else:
        pairs.append(Pair(m.name, min(x[1] for x in b), min(x[2] for x in b),
                          min(x[1] for x in n), min(x[2] for x in n)))
        for line in last["run"].server_stderr.splitlines():
          if "decisions" in line:
            decisions += int(line.split(":")[1].split()[0])
      if prog:
        prog.update(failed=int(bool(failures) and failures[-1].startswith(m.name + ":")))
  if prog:
    prog.close()
  res = _summary(pairs)
  res["failures"] = failures
  res["decisions"] = decisions
  res["server_bytes"] = os.path.getsize(server)
  return res


def format_report(plugin_res: dict | None, server_res: dict | None, model_bytes: int | None
                  ) -> str:
  lines = ["release-mode overhead (min of reps per module, summed)"]
  if plugin_res:
    p = plugin_res
    lines.append(
        f"  clang-22 -Oz + plugin vs plain: {p['modules']} modules, wall "
        f"{p['new_wall_s']:.2f}s / {p['base_wall_s']:.2f}s = {p['wall_ratio']:.3f}x, "
        f"cpu {p['cpu_ratio']:.3f}x (goal <= 1.02x); {len(p['failures'])} failed")
    fd = p["follow_default"]
    lines.append(
        f"    same plugin following the heuristic (model evaluated, decisions = default; "
        f"advisor overhead alone): wall {fd['wall_ratio']:.3f}x, cpu {fd['cpu_ratio']:.3f}x")
    lines.append(f"    .text: {p['text_bytes_plugin']} bytes with the plugin vs "
                 f"{p['text_bytes_plain']} plain "
                 f"({(p['text_bytes_plugin'] / max(p['text_bytes_plain'], 1) - 1) * 100:+.2f}%)")
    lines.append(f"  plugin size: {p['plugin_bytes']} bytes"
                 + (f" (model object {model_bytes} bytes)" if model_bytes else ""))
  if server_res:
    s = server_res
    lines.append(
        f"  llc-22 + advisor_server vs plain: {s['modules']} modules, wall "
        f"{s['new_wall_s']:.2f}s / {s['base_wall_s']:.2f}s = {s['wall_ratio']:.3f}x, "
        f"cpu {s['cpu_ratio']:.3f}x (goal <= 1.15x); {s['decisions']} decisions; "
        f"{len(s['failures'])} failed")
  return "\n".join(lines)
