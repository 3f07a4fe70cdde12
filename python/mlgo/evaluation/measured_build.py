"""A guard judged by measured run time on your own program, in one command.

The steps of the recipe in docs/regalloc.md ("A guard judged by measured run time"), on any build
that takes its compiler from a command line (make CC=..., ./configure CC=..., a script):

  1. Sides: clang's own allocation, the policy's, each --candidates policy's and
     --samples sampled allocations of the policy. Each side is built in its own copy of
     the source tree, by the build command with {cc} / {cxx} replaced by clang-22 or by
     tools/guarded_cc with --unguarded (every function follows that side).
  2. Each side's program runs every --run under cachegrind (names as llc knows them);
     its output must be clang's build's, or the side is dropped (and said); so is a
     side whose program fails or hangs (clang's build failing stops the run).
  3. Per function, the side whose build ran it in the fewest estimated cycles, summed
     over the runs (mlgo.evaluation.measured_guard.fastest_policy; select_on="data":
     only the terms that do not move with code addresses); functions no run reaches
     keep clang's allocation. This is guarded_cc's --policy_functions list.
  4. The routed build through guarded_cc --policy_functions, in one more copy.
  5. final="fastest" (the default): the routed program runs the --run workloads too, and
     the program shipped is the fastest binary measured there (geomean estimated cycles
     against clang's build): the routed one, a side's whole build, or clang's own (ties
     to clang's). Each side's build was measured as the very binary it is; the routed one
     is new, and cachegrind's branch and I-cache terms move with its addresses, so a
     per-function choice can lose as a whole (measured_guard.fastest_binary).
     final="routed": always the routed build.
  6. The shipped program and clang's run the --check runs (other inputs than the choice
     was made on: the figure to believe; the --run ones if none are given) under
     cachegrind: estimated cycles per run, in report.json / report.md / report.png.
     With layouts=N each check run is repeated in N more stack placements (runtime_build's
     layout_padding; the code placement is the build's own), and each run gets the mean
     change and a rank-sum verdict as in runtime_check (N >= 4 can reach p < 0.05).

Everything lands in the output directory, and a step already done there is skipped, so
an interrupted run continues where it stopped. A build that fails stops the run with
its log named.
"""
import concurrent.futures as cf
import dataclasses
import hashlib
import json
import pathlib
import shlex
import shutil
import subprocess
import sys

from mlgo.evaluation import measured_guard, runtime_report
from mlgo.evaluation.runtime_build import cachegrind, layout_padding, metrics
from mlgo.util.files import write_json_atomic


class MeasuredBuildError(RuntimeError):
  pass


@dataclasses.dataclass
class Side:
  name: str           # "default", "policy", "candidate-1", ...
  wrapper: list       # guarded_cc's flags before `--`; None: plain clang


def sides(policy, candidates=(), samples: int = 0) -> list:
  """Every allocation that competes, in guarded_cc's index order (0: the policy)."""
  # --unguarded: every function of a side's build follows that side (no static choice).
  out = [Side("default", None), Side("policy", ["--unguarded", f"--policy={policy}"])]
  out += [Side(f"candidate-{k}", ["--unguarded", f"--policy={c}"])
          for k, c in enumerate(candidates, 1)]
  out += [Side(f"candidate-{len(candidates) + k}",
               ["--unguarded", f"--policy={policy}", f"--samples={k}"])
          for k in range(1, samples + 1)]
  return out


def compiler_commands(guarded_cc, clang, clangxx, wrapper) -> dict:
  """{"cc": ..., "cxx": ...} as shell words for the build command's {cc} and {cxx}."""
  if wrapper is None:
    return {"cc": shlex.quote(str(clang)), "cxx": shlex.quote(str(clangxx))}
  base = [str(guarded_cc)] + list(wrapper)
  return {"cc": shlex.join(base + ["--"]), "cxx": shlex.join(base + ["--cxx", "--"])}


def build(source, tree, command: str, compilers: dict, log, timeout: float = 7200):
  """A fresh copy of `source` at `tree`, built there by `command` ({cc}/{cxx} filled)."""
  if tree.exists():
    shutil.rmtree(tree)
  shutil.copytree(source, tree, symlinks=True)
  cmd = command.replace("{cc}", compilers["cc"]).replace("{cxx}", compilers["cxx"])
  with open(log, "w", encoding="utf-8") as f:
    f.write(f"$ {cmd}\n")
    f.flush()
    r = subprocess.run(cmd, shell=True, cwd=tree, stdout=f, stderr=subprocess.STDOUT,
                       timeout=timeout, check=False)
  if r.returncode != 0:
    raise MeasuredBuildError(f"the build failed (exit {r.returncode}); its log: {log}")


def profile(tree, program: str, runs, out_dir, tag: str, stack_shift: int = 0,
            jobs: int = 1) -> tuple:
  """Runs `program` (relative to `tree`) on each run's arguments under cachegrind, `jobs`
  at a time (cachegrind is single-threaded, and its counts do not depend on the load):
  ([sha256 of stdout per run: outputs can be large, only equality matters],
  {select_on: {function: its cost summed over the runs}},
  [estimated cycles of each whole run], [instructions of each whole run])."""
  exe = tree / program
  if not exe.exists():
    raise MeasuredBuildError(f"the build made no {program} (looked for {exe})")

  def one(item):
    i, run = item
    cg = out_dir / f"cg.{tag}.{i}"
    try:
      stdout, events = cachegrind(exe, shlex.split(run), tree, cg, demangle=False,
                                  stack_shift=stack_shift)
    except RuntimeError as e:
      raise MeasuredBuildError(f"{program} {run}: {e}") from None
    except subprocess.TimeoutExpired:
      raise MeasuredBuildError(f"{program} {run}: no end within an hour under "
                               f"cachegrind") from None
    return hashlib.sha256(stdout).hexdigest(), metrics(events), cg
  with cf.ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
    done = list(ex.map(one, enumerate(runs)))
  per_fn = {k: {} for k in measured_guard.SELECT_ON}
  for _, _, cg in done:
    names, counts = measured_guard.function_events(cg)   # the file read once
    for f, c in counts.items():
      m = metrics(dict(zip(names, c)))
      for k, fns in per_fn.items():
        fns[f] = fns.get(f, 0) + m[measured_guard.SELECT_ON[k]]
  return ([h for h, _, _ in done], per_fn, [w["cycles"] for _, w, _ in done],
          [w["instructions"] for _, w, _ in done])


def program_functions(exe) -> set:
  """The functions `exe` itself defines (its text symbols), by llvm-nm."""
  r = subprocess.run(["llvm-nm-22", "--defined-only", str(exe)], capture_output=True,
                     text=True, check=False)
  if r.returncode != 0:
    raise MeasuredBuildError(f"{exe}: llvm-nm failed: {r.stderr.strip()[-300:]}")
  return {p[2] for p in (line.split() for line in r.stdout.splitlines())
          if len(p) == 3 and p[1] in "tTW"}


def _done(path) -> dict | None:
  try:
    return json.loads(path.read_text())
  except (OSError, ValueError):
    return None


def measured_build(source, command: str, program: str, runs, output, *, policy,
                   candidates=(), samples: int = 0, check_runs=(), guarded_cc,
                   layouts: int = 0, select_on: str = "cycles", final_mode: str = "fastest",
                   jobs: int = 2, stream=sys.stderr) -> dict:
  """The module docstring's steps; returns the report (also in output/report.json)."""
  from mlgo.util.toolchain import toolchain  # pylint: disable=import-outside-toplevel
  source, out = pathlib.Path(source).resolve(), pathlib.Path(output).resolve()
  if not source.is_dir():
    raise MeasuredBuildError(f"{source}: not a directory (the source tree to build)")
  if not runs:
    raise MeasuredBuildError("no --run: the choice needs a workload")
  if out == source or source in out.parents:
    raise MeasuredBuildError(f"{out}: the output must be outside the source tree")
  if select_on not in measured_guard.SELECT_ON:
    raise MeasuredBuildError(f"select_on: {select_on!r} is not one of "
                             f"{', '.join(measured_guard.SELECT_ON)}")
  if final_mode not in measured_guard.FINAL:
    raise MeasuredBuildError(f"final: {final_mode!r} is not one of "
                             f"{', '.join(measured_guard.FINAL)}")
  out.mkdir(parents=True, exist_ok=True)
  tc = toolchain(22)
  all_sides = sides(policy, candidates, samples)
  costs, kept = {}, []
  for side in all_sides:
    d = out / side.name
    d.mkdir(exist_ok=True)
    # What a side's build and profile depend on: a change of any redoes them.
    key = json.dumps([str(source), command, program, list(runs), side.wrapper])
    if _done(d / "built") != key:
      print(f"measured_build: building {side.name}", file=stream, flush=True)
      build(source, d / "src", command,
            compiler_commands(guarded_cc, tc.clang, tc.clangxx, side.wrapper), d / "build.log")
      (d / "built").write_text(json.dumps(key))
      for stale in ("profile.json", "check.json"):
        (d / stale).unlink(missing_ok=True)
    state = d / "profile.json"
    got = _done(state)
    if (got is None or set(got.get("functions", {})) != set(measured_guard.SELECT_ON)
        or "output_sha256" not in got):
      print(f"measured_build: profiling {side.name} on {len(runs)} run(s)", file=stream,
            flush=True)
      try:
        outputs, per_fn, totals, _ = profile(d / "src", program, runs, d, "select",
                                             jobs=jobs)
      except MeasuredBuildError as e:
        if side.name == "default":
          raise
        print(f"measured_build: {side.name}'s program failed ({e}): left out",
              file=stream, flush=True)
        continue
      got = {"output_sha256": outputs, "functions": per_fn,
             "totals": totals}   # functions: {select_on: {function: cost}}
      write_json_atomic(state, got)
    if side.name != "default" and got["output_sha256"] != costs["default"]["output_sha256"]:
      print(f"measured_build: {side.name} printed something else than clang's build: "
            f"left out", file=stream, flush=True)
      continue
    costs[side.name] = got
    if side.name != "default":
      kept.append(side)
  # Only the program's own functions: the C library's and the loader's change with the
  # layout, and no build of the program compiles them.
  own = program_functions(out / "default" / "src" / program)
  default_cost = {f: c for f, c in costs["default"]["functions"][select_on].items()
                  if f in own}
  route = measured_guard.fastest_policy(default_cost,
                                        [costs[s.name]["functions"][select_on] for s in kept])
  # Indices in guarded_cc's order: a side left out keeps its place in the list.
  index = {s.name: i for i, s in enumerate(all_sides[1:])}
  route = {f: index[kept[k].name] for f, k in route.items()}
  listing = out / "functions.txt"
  listing.write_text("".join(f"{f} {route[f]}\n" for f in sorted(route)))
  wrapper = [f"--policy={policy}"]
  if candidates:
    wrapper.append("--candidates=" + ",".join(str(c) for c in candidates))
  if samples:
    wrapper.append(f"--samples={samples}")
  final = out / "guarded"
  final.mkdir(exist_ok=True)
  key = json.dumps([str(source), command, program, wrapper, listing.read_text()])
  if _done(final / "built") != key:
    print(f"measured_build: building the final program ({len(route)} functions from a "
          f"policy's allocation)", file=stream, flush=True)
    build(source, final / "src", command,
          compiler_commands(guarded_cc, tc.clang, tc.clangxx,
                            wrapper + [f"--policy_functions={listing}"]), final / "build.log")
    (final / "built").write_text(json.dumps(key))
    for stale in ("profile.json", "check.json"):
      (final / stale).unlink(missing_ok=True)
  shipped, selection = "routed", {}
  if final_mode == "fastest":
    routed = _done(final / "profile.json")
    if routed is None or "output_sha256" not in routed:
      print("measured_build: profiling the routed program on the --run workloads",
            file=stream, flush=True)
      outputs, _, totals, _ = profile(final / "src", program, runs, final, "select",
                                      jobs=jobs)
      routed = {"output_sha256": outputs, "totals": totals}
      write_json_atomic(final / "profile.json", routed)
    measured = {}
    if routed["output_sha256"] == costs["default"]["output_sha256"]:
      measured["routed"] = routed["totals"]
    else:
      print("measured_build: the routed program printed something else than clang's "
            "build: not shipped", file=stream, flush=True)
    measured.update((s.name, costs[s.name]["totals"]) for s in kept)
    shipped, selection = measured_guard.fastest_binary(costs["default"]["totals"], measured)
    print(f"measured_build: shipping {shipped} (on the --run workloads: "
          + ", ".join(f"{k} {v:+.2f}%" for k, v in selection.items()) + ")",
          file=stream, flush=True)
  ship_dir = final if shipped == "routed" else out / shipped
  check = list(check_runs) or list(runs)
  rows = []
  base = _check(out / "default", program, check, "check", stream, layouts, jobs)
  mine = _check(ship_dir, program, check, "check", stream, layouts, jobs)
  if mine["output_sha256"] != base["output_sha256"]:
    raise MeasuredBuildError(f"the shipped program printed something else than clang's "
                             f"build on the check runs; see {ship_dir / 'src'}")
  sides_by_run = []   # runtime_check's row shape: each side's metrics per layout
  for j, run in enumerate(check):
    lay = {side: [{"cycles": t[j]} for t in got["totals"]]
           for side, got in (("default", base), ("policy", mine))}
    sides_by_run.append({"layouts": lay})
    md, mg = (sum(m["cycles"] for m in lay[k]) / len(lay[k]) for k in ("default", "policy"))
    di, gi = base["instructions"][0][j], mine["instructions"][0][j]
    row = {"run": run, "default_cycles": round(md), "shipped_cycles": round(mg),
           "change_pct": 100.0 * (mg / md - 1.0) if md else 0.0,
           # Instructions do not depend on where code and stack lie; the estimated
           # cycles' cache and branch terms do (cachegrind simulates by address).
           "instructions_change_pct": 100.0 * (gi / di - 1.0) if di else 0.0}
    if layouts:
      v = runtime_report.layout_summary(sides_by_run[-1])
      row.update(layouts=v["layouts"], p_slower=v["p_slower"], p_faster=v["p_faster"],
                 verdict=v["verdict"])
    rows.append(row)
  geo = runtime_report.geomean_change(sides_by_run, over_layouts=True)
  report = {"program": program, "policy": str(policy), "select_on": select_on,
            "candidates": [str(c) for c in candidates], "samples": samples,
            "sides_kept": [s.name for s in kept],
            "sides_left_out": [s.name for s in all_sides[1:] if s not in kept],
            "functions_chosen": len(route),
            "chosen_per_side": {s.name: sum(1 for k in route.values() if k == index[s.name])
                                for s in kept},
            "final": final_mode, "shipped": shipped,
            "selection_change_pct": selection,
            "check_on_selection_runs": not check_runs, "runs": rows,
            "geomean_change_pct": geo, "binary": str(ship_dir / "src" / program)}
  (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
  (out / "report.md").write_text(markdown(report))
  plot(report, out / "report.png")
  return report


def _check(side_dir, program, runs, tag, stream, layouts: int = 0, jobs: int = 1) -> dict:
  """{"output_sha256": stdout's hash per run, "totals": [estimated cycles per run] per
  layout, "instructions": the same for instructions}; the layouts `jobs` at a time."""
  state = side_dir / f"{tag}.json"
  got = _done(state)
  if (got is None or got.get("runs") != list(runs) or len(got["totals"]) != layouts + 1
      or "instructions" not in got or "output_sha256" not in got):
    print(f"measured_build: measuring {side_dir.name} on {len(runs)} check run(s)"
          + (f" in {layouts + 1} layouts" if layouts else ""), file=stream, flush=True)

    def layout(i):
      return profile(side_dir / "src", program, runs, side_dir, f"{tag}.{i}",
                     stack_shift=layout_padding(i)[3] if i else 0)
    with cf.ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
      done = list(ex.map(layout, range(layouts + 1)))
    for i, (out_i, _, _, _) in enumerate(done):
      if out_i != done[0][0]:
        raise MeasuredBuildError(f"{side_dir / 'src' / program} prints something else in "
                                 f"stack layout {i} than in layout 0")
    got = {"output_sha256": done[0][0], "totals": [t for _, _, t, _ in done],
           "instructions": [ins for _, _, _, ins in done], "runs": list(runs)}
    write_json_atomic(state, got)
  return got


def markdown(report: dict) -> str:
  lines = [f"# {report['program']}: measured guard against clang's allocation", "",
           f"Policy {report['policy']}; candidates: {', '.join(report['candidates']) or 'none'}; "
           f"samples: {report['samples']}. {report['functions_chosen']} functions from a "
           f"policy's allocation ({', '.join(f'{k} {v}' for k, v in report['chosen_per_side'].items())})."]
  if report["sides_left_out"]:
    lines.append(f"Left out (their output differed or their program failed): {', '.join(report['sides_left_out'])}.")
  if report.get("selection_change_pct"):
    lines.append(f"Shipped: **{report['shipped']}**, the fastest binary on the --run "
                 "workloads (against clang's build: "
                 + ", ".join(f"{k} {v:+.2f}%" for k, v in report["selection_change_pct"].items())
                 + "; clang's own is shipped unless one is faster).")
  if report["check_on_selection_runs"]:
    lines.append("Measured on the runs the choice was made on (no --check): in-sample.")
  lay = report["runs"][0].get("layouts") if report["runs"] else None
  if lay:
    lines.append(f"Means over {lay} stack layouts a side; verdict by the rank-sum test "
                 f"(p < {runtime_report.SIGNIFICANCE}).")
  lines += ["", "| run | clang's build (est. cycles) | shipped | change | instructions |"
            + (" verdict |" if lay else ""), "|---|---:|---:|---:|---:|" + ("---|" if lay else "")]
  for r in report["runs"]:
    lines.append(f"| `{r['run']}` | {r['default_cycles']:,} | {r['shipped_cycles']:,} | "
                 f"{r['change_pct']:+.2f}% | {r['instructions_change_pct']:+.2f}% |"
                 + (f" {r['verdict']} |" if lay else ""))
  lines += ["", f"Geomean change: {report['geomean_change_pct']:+.2f}%", ""]
  return "\n".join(lines)


def plot(report: dict, path):
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  runs = report["runs"]
  fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(runs) + 2), 3))
  vals = [r["change_pct"] for r in runs]
  ax.bar(range(len(runs)), vals, color=["tab:green" if v <= 0 else "tab:red" for v in vals])
  ax.axhline(0, color="black", linewidth=0.8)
  ax.set_xticks(range(len(runs)), [r["run"][:24] for r in runs], rotation=20, ha="right",
                fontsize=8)
  ax.set_ylabel("estimated cycles vs clang (%)")
  ax.set_title(f"{report['program']}: geomean {report['geomean_change_pct']:+.2f}%")
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)
