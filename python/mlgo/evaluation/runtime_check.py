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
Building and running one program: runtime_build. The guard by measured run time:
measured_guard. The programs, their roles and workloads: runtime_programs. Verdicts
over memory layouts, the table and the plot: runtime_report.
Hardware counters: when `perf stat` can count instructions (perf_available), each build
also runs once natively under perf; otherwise that is skipped and said so.
"""
import concurrent.futures as cf
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys

from mlgo import problems as problems_lib
from mlgo.evaluation.measured_guard import FINAL, selected_build
from mlgo.evaluation.runtime_build import (LAYOUT_RECIPE, build_program, cachegrind,
                                           layout_padding, metrics, rebuild_layout)
from mlgo.evaluation.runtime_programs import (Program, prepare_program, program_args, select,
                                             write_workload)
from mlgo.evaluation.runtime_report import layout_summary
from mlgo.policy import policy_io

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
        candidates=(), samples: int = 0, no_more_spill_code=None,
        select_on: str = "cycles", final: str = "routed",
        selection_layouts: int = 1) -> list:
  """guarded: the policy side is built with guarded compiles (mlgo.env.guarded; its
  build dir is <program>/guarded), its figures still under "policy" in the rows.
  candidates (policy dirs) and samples (that many sampled allocations of the policy,
  each function with its own seed: env.policies.PerFunctionSample): more allocations
  for either guard to choose from per function (the static guard: the lowest remarks
  cost; the measured guard: the fastest on the second workload). no_more_spill_code
  (the static guard): a candidate may not add spill code (mlgo.env.guarded).
  measured_guard: the policy side is a selected build (<program>/measured): per function
  the policy's allocation only where it ran faster on a second workload
  (write_workload(variant=1), mlgo.evaluation.measured_guard); the row's "selection"
  says how many functions kept it. select_on: what the choice compares per function
  (measured_guard.SELECT_ON; the verdicts are always on estimated cycles). final: the
  measured guard's binary, "routed" or "fastest" (measured_guard.selected_build).
  selection_layouts: the measured guard's choice averages each function's cost over
  that many memory layouts of each build (measured_guard.selected_build).
  pgo: both sides are PGO builds (-fprofile-instr-use with a profile of the program's
  own workload, taken once per output dir), so llc's block frequencies are measured;
  the comparison is then policy-with-profile against default-with-profile.
  layouts: each side is also built and linked in `layouts` more memory layouts (its
  allocation with other offsets inside functions, rebuild_layout; objects shuffled and
  moved, link_program) and run in each; the row's "layouts" entry then holds every
  layout's metrics per side and layout_summary's verdict (a change within what moving
  the code produces is no change)."""
  pol = policy_io.load_policy(policy_dir)
  if not problems_lib.same_decisions(pol.problem, problem):
    raise ValueError(f"{policy_dir}: policy is for {pol.problem}, not {problem}")
  if guarded and measured_guard:
    raise ValueError("runtime_check: --guarded and --measured_guard are two different "
                     "guards; pick one")
  if (candidates or samples) and not (measured_guard or guarded):
    raise ValueError("runtime_check: candidates and samples are for a guard "
                     "(guarded or measured_guard)")
  if select_on != "cycles" and not measured_guard:
    raise ValueError("runtime_check: select_on is for the measured guard")
  if selection_layouts != 1 and not measured_guard:
    raise ValueError("runtime_check: selection_layouts is for the measured guard")
  if final not in FINAL or (final != "routed" and not measured_guard):
    raise ValueError(f"runtime_check: final={final!r}: 'fastest' or 'routed', and only "
                     f"for the measured guard")
  if no_more_spill_code and not guarded:
    raise ValueError("runtime_check: no_more_spill_code is a rule of the static guard "
                     "(guarded)")
  from mlgo.env.guarded import candidate_policies  # pylint: disable=import-outside-toplevel
  others = candidate_policies(pol, candidates, samples, problem)
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
    build_dirs, recipes = {}, {}   # recipes: build_program's keywords per side (layouts)
    for variant, spec, w in (("default", None, None), ("policy", pol.spec, pol.arch.w)):
      g = guarded and variant == "policy"
      build_dirs[variant] = out / prog.name / ("guarded" if g else variant)
      recipes[variant] = dict(problem=problem, spec=spec, weights=w, jobs=jobs,
                              llvm_version=llvm_version, guarded=g, clang_flags=clang_flags,
                              candidates=others if g else (),
                              no_more_spill_code=no_more_spill_code if g else None)
      if variant not in res:
        print(f"runtime_check: building {prog.name} ({'guarded' if g else variant})",
              file=stream, flush=True)
        build_program(prog, src, build_dirs[variant], **recipes[variant])
    selection = None
    if measured_guard:
      build_dirs["policy"], selection, recipes["policy"] = selected_build(
          prog, src, out, build_dirs, recipes, second, [pol] + others, jobs, stream,
          select_on, final, selection_layouts)
    # Every run still to make, both sides and every layout, `jobs` at a time: cachegrind
    # is single-threaded and its counts do not depend on what else runs.
    todo = [(v, 0) for v in ("default", "policy") if v not in res]
    todo += [(v, i) for v in ("default", "policy")
             for i in range(len(lay[v]) + 1, layouts + 1)]
    runs = _measure(prog, src, out, build_dirs, recipes, todo, args, layouts, llvm_version,
                    jobs, stream)
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


def _measure(prog, src, out, build_dirs, recipes, todo, args, layouts, llvm_version, jobs,
             stream) -> dict:
  """{(variant, layout): (output sha256, metrics, output bytes)} for each run in `todo`,
  `jobs` at a time: layout 0 is the plain build, layout i > 0 the same allocation
  compiled again with that layout's code placement and linked in that layout
  (rebuild_layout; the builds first, then every run) with its stack shift."""
  exes = {}
  for variant, i in todo:
    if i:
      print(f"runtime_check: building {prog.name} ({variant}) in layout {i}/{layouts}",
            file=stream, flush=True)
      exes[variant, i] = rebuild_layout(prog, src, build_dirs[variant], recipes[variant], i,
                                        llvm_version)

  def one(task):
    variant, i = task
    if i:
      exe = exes[variant, i]
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


