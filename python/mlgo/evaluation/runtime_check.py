"""Measured execution of programs built with a regalloc policy, against the default.

A static reward can mislead, so this builds real programs from Debian source packages
twice -- once with the default allocator, once with the policy in llc's loop for every
translation unit -- runs both under valgrind's cachegrind with cache and branch
simulation, checks that both produce the same output, and compares:
  instructions (Ir), D1 misses (D1mr + D1mw), LL misses (ILmr + DLmr + DLmw),
  branch mispredictions (Bcm + Bim), and an estimated cycle count
      cycles = Ir + 10 * (I1mr + D1mr + D1mw) + 100 * (ILmr + DLmr + DLmw)
               + 15 * (Bcm + Bim)
  (a simple in-order model: 10 cycles per L1 miss served by LL, 100 per LL miss,
  15 per mispredicted branch; cachegrind counts are deterministic).
The programs, their roles and workloads: runtime_programs. Verdicts over memory layouts,
the table and the plot: runtime_report.
Hardware counters: when `perf stat` can count instructions (perf_available), each build
also runs once natively under perf; otherwise that is skipped and said so.
"""
import concurrent.futures as cf
import hashlib
import json
import os
import pathlib
import random
import shutil
import subprocess
import sys

from mlgo import env
from mlgo import problems as problems_lib
from mlgo.evaluation import measured_guard
from mlgo.evaluation.runtime_programs import (Program, prepare_program, program_args, select,
                                             write_workload)
from mlgo.evaluation.runtime_report import layout_summary
from mlgo.policy import policy_io
from mlgo.util.toolchain import toolchain

CACHE_MISS_L1 = 10
CACHE_MISS_LL = 100
MISPREDICT = 15


CXX_EXTS = (".cc", ".cpp", ".cxx")


def _obj_name(rel: str) -> str:
  """Object file name of a unit: its path with / as _ (a generated unit: gen_NAME)."""
  if os.path.isabs(rel):
    return "gen_" + os.path.basename(rel) + ".o"
  return rel.replace("/", "_") + ".o"


def _compile_tu(src_root, rel, cflags, obj, problem, spec, weights, llvm_version, timeout,
                llc_flags=(), policy=None, clang_flags=(), guarded=False,
                policy_functions=None):
  """One translation unit: clang -O2 to bitcode, then llc with the allocator under test
  (`policy`, else the policy of spec/weights, else the default; guarded: a guarded
  compile of it, mlgo.env.guarded, which keeps the policy's allocation for exactly the
  functions in `policy_functions` when that is given). Returns (error | None, the
  compile's reward dict)."""
  tc = toolchain(llvm_version)
  bc = obj + ".bc"
  cc = tc.clangxx if rel.endswith(CXX_EXTS) else tc.clang
  r = subprocess.run([cc, "-O2", "-fPIC", "-w", "-c", "-emit-llvm"] + cflags +
                     list(clang_flags) + [rel, "-o", bc], cwd=src_root, capture_output=True,
                     text=True,
                     timeout=timeout)
  if r.returncode != 0:
    return f"clang failed on {rel}: {r.stderr[-300:]}", None
  if policy is None:
    policy = (policy_io.Policy(spec, weights) if spec is not None else env.CompilerDefault())
  module = env.LlcModule(rel, bc, ["-O2", "-relocation-model=pic"] + list(llc_flags))
  if guarded:
    from mlgo.env import guarded as guarded_lib  # pylint: disable=import-outside-toplevel
    g = guarded_lib.guarded_compile(module, problem, policy, llvm_version=llvm_version,
                                    timeout=timeout, output_path=obj,
                                    policy_functions=policy_functions)
    if not g.ok:
      return f"llc failed on {rel}: {g.result.reason}", None
    return None, {"functions": g.scores, "total": float(sum(g.scores.values()))}
  res = env.compile_module(module, problem, policy, llvm_version=llvm_version,
                           timeout=timeout, output_path=obj)
  if not res.ok:
    return f"llc failed on {rel}: {res.reason}", None
  return None, res.reward


def build_program(prog: Program, src_root, out_dir, problem, spec, weights, *, jobs=2,
                  llvm_version=22, timeout=600.0, llc_flags=(), policy=None, clang_flags=(),
                  link_flags=(), guarded=False, policy_functions=None):
  """Builds `prog` into out_dir/<name>: every translation unit through llc with the
  allocator under test (policy, or spec/weights, or the default), extra llc_flags (and
  clang_flags for the -O2 bitcode, link_flags for the link, e.g. PGO's). The optimized
  bitcode stays beside each object (OBJ.bc); the per-function scores of `problem`'s
  reward go to out_dir/functions.json. guarded with policy_functions: a selected build
  (the policy's allocation for those functions only)."""
  out_dir = pathlib.Path(out_dir)
  out_dir.mkdir(parents=True, exist_ok=True)
  objs, functions = [], {}
  with cf.ProcessPoolExecutor(max_workers=max(1, jobs)) as ex:
    futs = []
    for rel in prog.sources:
      obj = str(out_dir / _obj_name(rel))
      objs.append(obj)
      futs.append(ex.submit(_compile_tu, str(src_root), rel, prog.cflags, obj, problem,
                            spec, weights, llvm_version, timeout, tuple(llc_flags), policy,
                            tuple(clang_flags), guarded,
                            None if policy_functions is None else frozenset(policy_functions)))
    for f in futs:
      err, reward = f.result()
      if err:
        raise RuntimeError(f"{prog.name}: {err}")
      functions.update(reward.get("functions", {}))
  (out_dir / "functions.json").write_text(json.dumps(functions, indent=0) + "\n")
  return link_program(prog, objs, out_dir / prog.name, llvm_version, link_flags)


def link_program(prog: Program, objs, exe, llvm_version=22, link_flags=(), layout=0):
  """Links `objs` into `exe`. layout 0: the objects in source order, nothing added.
  layout i > 0: the same objects in a shuffled order after a padding object that moves
  the code, constants and data by a few bytes to a few KB (layout_padding; run() also
  moves the stack): every address changes, no instruction does. Cachegrind's caches and branch predictor are indexed by
  address, so a one-layout comparison mixes the code's effect with where it landed."""
  exe = pathlib.Path(exe)
  exe.parent.mkdir(parents=True, exist_ok=True)
  objs = [str(o) for o in objs]
  tc = toolchain(llvm_version)
  if layout:
    rng = random.Random(f"mlgo-layout-{layout}")
    rng.shuffle(objs)
    text_pad, rodata_pad, data_pad, _ = layout_padding(layout)
    pad_s = exe.parent / "layout_pad.s"
    # No symbols: the padding adds nothing a program could clash with.
    pad_s.write_text(f".text\n.p2align 4\n.skip {text_pad}, 0xcc\n"
                     f".section .rodata\n.p2align 4\n.skip {rodata_pad}, 0\n"
                     f".data\n.p2align 4\n.skip {data_pad}, 0\n"
                     f'.section .note.GNU-stack,"",@progbits\n')
    pad_o = exe.parent / "layout_pad.o"
    r = subprocess.run([tc.clang, "-c", str(pad_s), "-o", str(pad_o)], capture_output=True,
                       text=True)
    if r.returncode != 0:
      raise RuntimeError(f"{prog.name}: layout {layout}: padding object: {r.stderr[-300:]}")
    objs = [str(pad_o)] + objs
  r = subprocess.run([tc.clangxx if prog.cxx else tc.clang, "-pie", "-o", str(exe)]
                     + list(link_flags) + objs + prog.libs,
                     capture_output=True, text=True)
  if r.returncode != 0:
    raise RuntimeError(f"{prog.name}: link failed: {r.stderr[-500:]}")
  return exe


def layout_padding(layout: int) -> tuple:
  """(code, read-only data, data, stack) bytes by which layout `layout` (> 0) moves the
  program: the first three placed before its own sections by link_program, the last
  as cachegrind's stack_shift. Deterministic, spread over a page so that cache sets,
  cache lines and the predictor's index bits all move."""
  rng = random.Random(f"mlgo-layout-pad-{layout}")
  return tuple(rng.randrange(16, 4096, 16) for _ in range(3)) + (rng.randrange(8, 4096),)


# Part of the default build's cache key, bumped whenever how a run is set up or what a
# layout varies changes: a default measured under an older recipe is built and measured
# again.
LAYOUT_RECIPE = 3


def relink_layout(prog: Program, build_dir, layout: int, llvm_version=22, link_flags=()):
  """build_dir's objects (from build_program) linked again in `layout`, into
  build_dir/layout-<i>/<program>."""
  build_dir = pathlib.Path(build_dir)
  objs = [build_dir / _obj_name(rel) for rel in prog.sources]
  missing = [str(o) for o in objs if not o.exists()]
  if missing:
    raise FileNotFoundError(f"{prog.name}: objects to relink are missing: {missing[:3]}")
  return link_program(prog, objs, build_dir / f"layout-{layout}" / prog.name, llvm_version,
                      link_flags, layout=layout)


# The environment of every measured run. The process start copies the environment and
# the arguments above the stack, so their size moves the stack: a fixed environment
# keeps the caller's shell out of the figures. (Where the output dir lies still moves
# the counts a little, through valgrind's own mappings; the layouts average that out.)
RUN_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C"}


def cachegrind(exe, args, cwd, out_file, stack_shift: int = 0, demangle: bool = True):
  """Runs `exe args` under cachegrind in RUN_ENV; returns (stdout bytes, {event: count}).
  stack_shift: bytes of one extra environment variable, so the stack (spill slots
  included) starts that much lower. demangle False: the output file names functions by
  their symbols (as llc does), for measured_guard."""
  vg = shutil.which("valgrind")
  if not vg:
    raise RuntimeError("valgrind not found; `apt-get install valgrind`")
  run_env = dict(RUN_ENV)
  if stack_shift:
    run_env["MLGO_LAYOUT_STACK"] = "x" * stack_shift
  r = subprocess.run([vg, "--tool=cachegrind", "--cache-sim=yes", "--branch-sim=yes",
                      f"--cachegrind-out-file={out_file}"]
                     + ([] if demangle else ["--demangle=no"]) + [str(exe)] + list(args),
                     cwd=cwd, capture_output=True, timeout=3600, env=run_env)
  if r.returncode != 0:
    raise RuntimeError(f"{exe} exited with {r.returncode}: "
                       f"{r.stderr.decode('utf-8', 'replace')[-500:]}")
  events = summary = None
  for line in pathlib.Path(out_file).read_text().splitlines():
    if line.startswith("events:"):
      events = line.split()[1:]
    elif line.startswith("summary:"):
      summary = [int(x) for x in line.split()[1:]]
  if not events or not summary:
    raise RuntimeError(f"{out_file}: no cachegrind summary")
  return r.stdout, dict(zip(events, summary))


def metrics(ev: dict) -> dict:
  g = lambda k: ev.get(k, 0)
  d1 = g("D1mr") + g("D1mw")
  ll = g("ILmr") + g("DLmr") + g("DLmw")
  br = g("Bcm") + g("Bim")
  cycles = g("Ir") + CACHE_MISS_L1 * (g("I1mr") + d1) + CACHE_MISS_LL * ll + MISPREDICT * br
  return {"instructions": g("Ir"), "d1_misses": d1, "ll_misses": ll, "mispredicts": br,
          "cycles": cycles}


def perf_available() -> tuple:
  """(True, how) when `perf stat -e instructions` counts on this machine, else (False,
  why not): no perf, no permission, or no hardware counters (a VM without a PMU)."""
  perf = shutil.which("perf")
  if not perf:
    return False, "perf is not installed"
  try:
    r = subprocess.run([perf, "stat", "-x,", "-e", "instructions", "true"],
                       capture_output=True, text=True, timeout=60)
  except (OSError, subprocess.SubprocessError) as e:
    return False, f"perf stat could not run: {e}"
  err = r.stderr.strip()
  if r.returncode != 0:
    return False, f"perf stat -e instructions failed: {(err.splitlines() or ['?'])[-1]}"
  counts = _perf_counts(err)
  if not counts.get("instructions"):
    return False, ("perf stat cannot count instructions here (no hardware counters, "
                   f"or perf_event_paranoid): {(err.splitlines() or ['?'])[-1]}")
  return True, f"perf stat counts instructions ({perf})"


def _perf_counts(csv_text: str) -> dict:
  """{event: count} from `perf stat -x,` output; unsupported events are left out."""
  out = {}
  for line in csv_text.splitlines():
    f = line.split(",")
    if len(f) >= 3 and f[0].strip().isdigit():
      out[f[2].split(":")[0].strip()] = int(f[0])
  return out


def perf_stat(exe, args, cwd, events=("instructions", "cycles")) -> dict:
  """Runs `exe args` natively under perf stat; returns {event: count}."""
  r = subprocess.run([shutil.which("perf") or "perf", "stat", "-x,", "-e", ",".join(events),
                      "--", str(exe)] + list(args), cwd=cwd, capture_output=True,
                     timeout=3600)
  if r.returncode != 0:
    raise RuntimeError(f"{exe} under perf stat exited with {r.returncode}: "
                       f"{r.stderr.decode('utf-8', 'replace')[-500:]}")
  return _perf_counts(r.stderr.decode("utf-8", "replace"))


def run(problem: str, policy_dir, out_dir, *, programs=None, role=None, jobs: int = 2,
        llvm_version: int = 22, stream=sys.stderr, guarded: bool = False,
        pgo: bool = False, layouts: int = 0, measured_guard: bool = False,
        candidates=(), samples: int = 0) -> list:
  """guarded: the policy side is built with guarded compiles (mlgo.env.guarded; its
  build dir is <program>/guarded), its figures still under "policy" in the rows.
  measured_guard: the policy side is a selected build (<program>/measured): per function
  the policy's allocation only where it ran faster on a second workload
  (write_workload(variant=1), mlgo.evaluation.measured_guard); the row's "selection"
  says how many functions kept it. candidates: more policy dirs for the measured guard
  to choose from (per function the fastest of the default, the policy and these);
  samples: that many sampled allocations of the policy as more candidates (each
  function sampled with its own seed: env.policies.PerFunctionSample).
  pgo: both sides are PGO builds (-fprofile-instr-use with a profile of the program's
  own workload, taken once per output dir), so llc's block frequencies are measured;
  the comparison is then policy-with-profile against default-with-profile.
  layouts: each side is also linked in `layouts` more memory layouts (link_program) and
  run in each; the row's "layouts" entry then holds every layout's metrics per side
  and layout_summary's verdict (a change within what moving the code produces is no
  change)."""
  pol = policy_io.load_policy(policy_dir)
  if not problems_lib.same_decisions(pol.problem, problem):
    raise ValueError(f"{policy_dir}: policy is for {pol.problem}, not {problem}")
  if guarded and measured_guard:
    raise ValueError("runtime_check: --guarded and --measured_guard are two different "
                     "guards; pick one")
  if (candidates or samples) and not measured_guard:
    raise ValueError("runtime_check: candidates and samples are for the measured guard")
  others = [policy_io.load_policy(c) for c in candidates]
  from mlgo.env.policies import PerFunctionSample  # pylint: disable=import-outside-toplevel
  others += [PerFunctionSample(policy_io.Policy(pol.spec, pol.arch.w, greedy=False), seed=k)
             for k in range(1, samples + 1)]
  for c, o in zip(candidates, others):   # the samples are the policy's own
    if not problems_lib.same_decisions(o.problem, problem):
      raise ValueError(f"{c}: policy is for {o.problem}, not {problem}")
  out = pathlib.Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  inp, script = write_workload(out)
  second = write_workload(out / "selection-workload", variant=1) if measured_guard else None
  use_perf, why = perf_available()
  print(f"runtime_check: hardware counters {'used' if use_perf else 'skipped'}: {why}"
        + ("" if use_perf else "; cachegrind's simulated counts only"), file=stream,
        flush=True)
  rows = []
  for prog in select(programs, role):
    prog, src = prepare_program(prog, out)
    res, hw = {}, {}
    clang_flags = []
    if pgo:
      from mlgo.evaluation import profiled_corpus  # pylint: disable=import-outside-toplevel
      print(f"runtime_check: {prog.name}: profiling its workload", file=stream, flush=True)
      prof = profiled_corpus.profile_program(prog, src, out / f"pgo-{prog.name}", inp,
                                             script, jobs, llvm_version)
      clang_flags = [f"-fprofile-instr-use={prof}"]
    # The default build does not depend on the policy: reused from an earlier run into
    # the same output dir when the program, its flags and the compiler are the same.
    key = hashlib.sha256(json.dumps([prog.package, prog.sources, prog.cflags, prog.args,
                                     llvm_version, use_perf, pgo, LAYOUT_RECIPE]
                                    ).encode()).hexdigest()[:16]
    cached = out / prog.name / "default" / "result.json"
    lay = {"default": [], "policy": []}  # metrics in layouts 1..layouts
    if cached.exists():
      c = json.loads(cached.read_text())
      if c.get("key") == key:
        res["default"] = tuple(c["result"])
        lay["default"] = list(c.get("layouts", []))[:layouts]
        if c.get("perf"):
          hw["default"] = c["perf"]
        print(f"runtime_check: {prog.name} (default) from {cached}", file=stream, flush=True)
    args = program_args(prog, inp, script, relative=True)
    build_dirs = {}
    for variant, spec, w in (("default", None, None), ("policy", pol.spec, pol.arch.w)):
      g = guarded and variant == "policy"
      build_dirs[variant] = out / prog.name / ("guarded" if g else variant)
      if variant not in res:
        print(f"runtime_check: building {prog.name} ({'guarded' if g else variant})",
              file=stream, flush=True)
        build_program(prog, src, build_dirs[variant], problem, spec, w, jobs=jobs,
                      llvm_version=llvm_version, guarded=g, clang_flags=clang_flags)
    selection = None
    if measured_guard:
      build_dirs["policy"], selection = _measured_build(
          prog, src, out, build_dirs, second, problem, [pol] + others, jobs, llvm_version,
          clang_flags, stream)
    # Every run still to make, both sides and every layout, `jobs` at a time: cachegrind
    # is single-threaded and its counts do not depend on what else runs.
    todo = [(v, 0) for v in ("default", "policy") if v not in res]
    todo += [(v, i) for v in ("default", "policy")
             for i in range(len(lay[v]) + 1, layouts + 1)]
    runs = _measure(prog, out, build_dirs, todo, args, layouts, llvm_version, jobs, stream)
    for v in ("default", "policy"):
      if (v, 0) in runs:
        res[v] = runs[v, 0]
        if use_perf:   # natively, one at a time
          hw[v] = perf_stat(build_dirs[v] / prog.name, args, out)
      for i in range(len(lay[v]) + 1, layouts + 1):
        if runs[v, i][0] != res[v][0]:
          raise RuntimeError(f"{prog.name}: the {v} build's output changes with its memory "
                             f"layout ({build_dirs[v] / f'layout-{i}'}); refusing to report "
                             f"numbers")
        lay[v].append(runs[v, i][1])
    cached.write_text(json.dumps({"key": key, "result": list(res["default"]),
                                  "perf": hw.get("default"), "layouts": lay["default"]})
                      + "\n")
    same = res["default"][0] == res["policy"][0]
    if not same:
      raise RuntimeError(f"{prog.name}: the policy build's output differs from the default "
                         f"build's; refusing to report numbers")
    rows.append({"program": prog.name, "role": prog.role, "output_bytes": res["default"][2],
                 "default": res["default"][1], "policy": res["policy"][1]})
    if selection is not None:
      rows[-1]["selection"] = selection
    if layouts:
      rows[-1]["layouts"] = {v: [res[v][1]] + lay[v] for v in ("default", "policy")}
      rows[-1]["over_layouts"] = layout_summary(rows[-1])   # the verdict, in the JSON too
    if hw:
      rows[-1]["perf"] = hw
  return rows


def _measured_build(prog, src, out, build_dirs, second, problem, pols, jobs, llvm_version,
                    clang_flags, stream):
  """measured_guard's selected build of `prog`: the plain default build and a plain
  build of each policy in `pols` (the first is build_dirs["policy"]) run under
  cachegrind on the second workload (same output required); each function gets the
  allocation of the build that ran it fastest there (FunctionRouter on the channel for
  more than one policy). Returns (its build dir, the selection's summary)."""
  from mlgo.env.policies import FunctionRouter  # pylint: disable=import-outside-toplevel
  sides = ["default", "policy"] + [f"candidate-{k}" for k in range(1, len(pols))]
  for k, side in enumerate(sides[2:], 1):
    build_dirs[side] = out / prog.name / side
    print(f"runtime_check: building {prog.name} ({side})", file=stream, flush=True)
    build_program(prog, src, build_dirs[side], problem, None, None, jobs=jobs,
                  llvm_version=llvm_version, clang_flags=clang_flags, policy=pols[k])
  inp, script = second
  args = program_args(prog, inp, script, relative=True, selection=True)

  def one(side):
    f = out / prog.name / f"selection.cachegrind.{side}"
    print(f"runtime_check: running {prog.name} ({side}) on the second workload",
          file=stream, flush=True)
    stdout, _ = cachegrind(pathlib.Path(build_dirs[side] / prog.name).resolve(), args,
                           inp.parent, f, demangle=False)
    events, per_fn = measured_guard.function_events(f)
    return stdout, {fn: metrics(dict(zip(events, c)))["cycles"] for fn, c in per_fn.items()}
  with cf.ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
    runs = list(ex.map(one, sides))
  for side, (stdout, _) in zip(sides[1:], runs[1:]):
    if stdout != runs[0][0]:
      raise RuntimeError(f"{prog.name}: on the second workload the {side} build's output "
                         f"differs from the default build's; refusing to select")
  d_cost, costs = runs[0][1], [c for _, c in runs[1:]]
  route = measured_guard.fastest_policy(d_cost, costs)
  summary = measured_guard.summarize(d_cost, costs, route)
  d = out / prog.name / "measured"
  print(f"runtime_check: building {prog.name} (measured guard: a policy's allocation "
        f"for {len(route)} of {summary['functions_run']} functions run)", file=stream,
        flush=True)
  router = pols[0] if len(pols) == 1 else FunctionRouter(pols, route)
  build_program(prog, src, d, problem, None, None, jobs=jobs, llvm_version=llvm_version,
                guarded=True, clang_flags=clang_flags, policy=router,
                policy_functions=sorted(route))
  (d / "selection.json").write_text(json.dumps({**summary, "functions": sorted(route),
                                                "route": route}, indent=0) + "\n")
  return d, summary


def _measure(prog, out, build_dirs, todo, args, layouts, llvm_version, jobs,
             stream) -> dict:
  """{(variant, layout): (output sha256, metrics, output bytes)} for each run in `todo`,
  `jobs` at a time: layout 0 is the plain link, layout i > 0 a relink (relink_layout) run
  with its stack shift."""
  def one(task):
    variant, i = task
    if i:
      exe = relink_layout(prog, build_dirs[variant], i, llvm_version)
      what, name = f"in layout {i}/{layouts}", f"cachegrind.{variant}.layout-{i}"
    else:
      exe = build_dirs[variant] / prog.name
      what, name = "under cachegrind", f"cachegrind.{variant}"
    print(f"runtime_check: running {prog.name} ({variant}) {what}", file=stream, flush=True)
    stdout, ev = cachegrind(_run_path(out, prog, variant, i, exe), args, out,
                            out / prog.name / name,
                            stack_shift=layout_padding(i)[3] if i else 0)
    return hashlib.sha256(stdout).hexdigest(), metrics(ev), len(stdout)
  with cf.ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
    return dict(zip(todo, ex.map(one, todo)))


def _run_path(out, prog: Program, variant: str, layout: int, exe) -> str:
  """A path to `exe`, relative to `out` (the runs' working directory), of the same length
  for both sides and every layout: out/<program>/run/<d|p><layout>, a symbolic link.
  Program arguments start with it, and their size moves the stack."""
  link = pathlib.Path(out) / prog.name / "run" / f"{variant[0]}{layout:02d}"
  link.parent.mkdir(parents=True, exist_ok=True)
  if link.is_symlink() or link.exists():
    link.unlink()
  link.symlink_to(pathlib.Path(exe).resolve())
  return os.path.relpath(link, out)


