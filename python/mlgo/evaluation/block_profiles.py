"""Per-block measurements of real programs, for a learned performance model.

Builds each runtime_check program (mlgo.evaluation.runtime_check: real Debian sources,
every translation unit through llc with the default allocator or a policy in the loop),
runs it on its workload under callgrind, and writes one row per executed machine basic
block of the program's own code (mlgo.profiles.blocks): static features read from the
machine code, executions, and the measured events (instructions, cache misses, branch
mispredictions) with runtime_check's cycle estimate. A policy build of the same program
gives the rows of the other allocation of the same functions.

Output: <out>/<program>/<variant>/blocks.jsonl and <out>/summary.json; a program whose
rows exist is not rebuilt (resumable).
"""
import json
import pathlib
import sys

from mlgo import problems as problems_lib
from mlgo.evaluation import runtime_check as rc
from mlgo.profiles import blocks as blocks_lib


def block_cycles(row: dict) -> int:
  return rc.metrics(row)["cycles"]


def collect(problem: str, out_dir, *, policy_dir=None, programs=None, jobs: int = 2,
            llvm_version: int = 22, stream=sys.stderr) -> dict:
  from mlgo.policy import policy_io  # pylint: disable=import-outside-toplevel
  out = pathlib.Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  inp, script = rc.write_workload(out)
  variants = [("default", None, None)]
  if policy_dir:
    pol = policy_io.load_policy(policy_dir)
    if not problems_lib.same_decisions(pol.problem, problem):
      raise ValueError(f"{policy_dir}: policy is for {pol.problem}, not {problem}")
    variants.append(("policy", pol.spec, pol.arch.w))
  summary = {}
  for prog in rc.PROGRAMS:
    if programs and prog.name not in programs:
      continue
    prog, src = rc.prepare_program(prog, out)
    for variant, spec, w in variants:
      vdir = out / prog.name / variant
      rows_path = vdir / "blocks.jsonl"
      if rows_path.exists():
        rows = [json.loads(l) for l in rows_path.read_text().splitlines()]
      else:
        print(f"block_profiles: building {prog.name} ({variant})", file=stream, flush=True)
        exe = rc.build_program(prog, src, vdir, problem, spec, w, jobs=jobs,
                               llvm_version=llvm_version)
        args = rc.program_args(prog, inp, script)
        print(f"block_profiles: running {prog.name} ({variant}) under callgrind",
              file=stream, flush=True)
        _, prof = blocks_lib.profile_run(exe, args, out, vdir / "callgrind.out")
        rows = blocks_lib.join(blocks_lib.disassemble(str(exe)), prof, str(exe))
        for r in rows:
          r.update(program=prog.name, variant=variant, cycles=block_cycles(r))
        tmp = rows_path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
        tmp.replace(rows_path)
      summary[f"{prog.name}/{variant}"] = {
          "blocks": len(rows), "Ir": sum(r["Ir"] for r in rows),
          "cycles": sum(r["cycles"] for r in rows),
          "blocks_with_spill_code": sum(1 for r in rows if r["spills"] + r["reloads"]),
          "Ir_in_blocks_with_spill_code": sum(r["Ir"] for r in rows
                                              if r["spills"] + r["reloads"])}
      print(f"block_profiles: {prog.name} ({variant}): {summary[f'{prog.name}/{variant}']}",
            file=stream, flush=True)
  (out / "summary.json").write_text(json.dumps(summary, indent=1))
  return summary
