"""Per-block measurements of real programs: the data of the learned performance model.

Builds each runtime_check program (mlgo.evaluation.runtime_check: real Debian sources,
every translation unit through llc with the default allocator or a policy in the loop,
llc also writing its basic-block address map), runs it on its workload under callgrind,
and writes one row per executed machine basic block of the program's own code
(mlgo.profiles.blocks): llc's block id and static frequency, static features read from
the machine code, executions, the measured events (instructions, cache misses, branch
mispredictions) and runtime_check's cycle estimate. Variants of one program are other
allocations of the same functions:
  default   LLVM's own eviction advisor (no channel)
  policy    the policy, greedy
  sampled   the policy sampling its decisions (seeded): more varied spill code
Every variant must print exactly what the default prints.

Output: <out>/<program>/<variant>/blocks.jsonl (+ functions.json: the static remarks
cost per function of that build) and <out>/summary.json; a finished program/variant is
not rebuilt (resumable).
"""
import hashlib
import json
import pathlib
import sys

from mlgo import problems as problems_lib
from mlgo.evaluation import runtime_build as rb
from mlgo.evaluation import runtime_programs as rp
from mlgo.profiles import bbmap, blocks as blocks_lib

VARIANTS = ("default", "policy", "sampled")
SAMPLING_SEED = 1


def block_cycles(row: dict) -> int:
  return rb.metrics(row)["cycles"]


def load_rows(path) -> list:
  p = pathlib.Path(path)
  rows = []
  for i, line in enumerate(p.read_text().splitlines(), 1):
    try:
      rows.append(json.loads(line))
    except json.JSONDecodeError as e:
      raise ValueError(f"{p}:{i}: not a JSON row: {e}") from e
  return rows


def _variant_policy(variant, pol):
  from mlgo.policy import policy_io  # pylint: disable=import-outside-toplevel
  if variant == "default":
    return None
  if variant == "policy":
    return policy_io.Policy(pol.spec, pol.arch.w, greedy=True)
  if variant == "sampled":
    return policy_io.Policy(pol.spec, pol.arch.w, greedy=False, seed=SAMPLING_SEED)
  raise ValueError(f"unknown variant {variant!r} (one of {', '.join(VARIANTS)})")


def collect(problem: str, out_dir, *, policy_dir=None, programs=None, role=None,
            variants=None, jobs: int = 2, llvm_version: int = 22,
            stream=sys.stderr) -> dict:
  from mlgo.policy import policy_io  # pylint: disable=import-outside-toplevel
  out = pathlib.Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  inp, script = rp.write_workload(out)
  pol = None
  if policy_dir:
    pol = policy_io.load_policy(policy_dir)
    if not problems_lib.same_decisions(pol.problem, problem):
      raise ValueError(f"{policy_dir}: policy is for {pol.problem}, not {problem}")
  variants = list(variants or (VARIANTS if pol else ("default",)))
  if pol is None and set(variants) - {"default"}:
    raise ValueError(f"variants {variants} need a --policy")
  summary_path = out / "summary.json"
  summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
  for prog in rp.select(programs, role):
    prog, src = rp.prepare_program(prog, out)
    want_hash = None
    for variant in variants:
      vdir = out / prog.name / variant
      rows_path = vdir / "blocks.jsonl"
      if rows_path.exists():
        rows = load_rows(rows_path)
      else:
        print(f"block_profiles: building {prog.name} ({variant})", file=stream, flush=True)
        exe = rb.build_program(prog, src, vdir, problem, None, None, jobs=jobs,
                               llvm_version=llvm_version, llc_flags=bbmap.FLAGS_LLC,
                               policy=_variant_policy(variant, pol))
        args = rp.program_args(prog, inp, script)
        print(f"block_profiles: running {prog.name} ({variant}) under callgrind",
              file=stream, flush=True)
        stdout, prof = blocks_lib.profile_run(exe, args, out, vdir / "callgrind.out")
        digest = hashlib.sha256(stdout).hexdigest()
        (vdir / "output.sha256").write_text(digest + "\n")
        rows = blocks_lib.join(blocks_lib.disassemble(str(exe)), prof, str(exe))
        for r in rows:
          r.update(program=prog.name, variant=variant, cycles=block_cycles(r),
                   role=getattr(prog, "role", ""))
        tmp = rows_path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
        tmp.replace(rows_path)
      digest = (vdir / "output.sha256").read_text().strip()
      if want_hash is None:
        want_hash = digest
      elif digest != want_hash:
        raise RuntimeError(f"{prog.name}: the {variant} build prints something else than "
                           f"the {variants[0]} build; its profile is not comparable")
      summary[f"{prog.name}/{variant}"] = {
          "role": getattr(prog, "role", ""), "blocks": len(rows),
          "Ir": sum(r["Ir"] for r in rows), "cycles": sum(r["cycles"] for r in rows),
          "blocks_with_spill_code": sum(1 for r in rows if r["spills"] + r["reloads"]),
          "Ir_in_blocks_with_spill_code": sum(r["Ir"] for r in rows
                                              if r["spills"] + r["reloads"])}
      print(f"block_profiles: {prog.name} ({variant}): {summary[f'{prog.name}/{variant}']}",
            file=stream, flush=True)
      summary_path.write_text(json.dumps(summary, indent=1))
  return summary
