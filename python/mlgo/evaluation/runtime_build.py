"""Building and running one runtime_check program: every translation unit through clang
-O2 to bitcode and llc with the allocator under test (plain, guarded or selected), the
link (in memory layouts), a run under cachegrind with cache and branch simulation, and
the estimated cycle count
      cycles = Ir + 10 * (I1mr + D1mr + D1mw) + 100 * (ILmr + DLmr + DLmw)
               + 15 * (Bcm + Bim)
(a simple in-order model: 10 cycles per L1 miss served by LL, 100 per LL miss, 15 per
mispredicted branch; cachegrind counts are deterministic). runtime_check compares builds;
measured_guard chooses between them.
"""
import concurrent.futures as cf
import json
import os
import pathlib
import random
import shutil
import subprocess

from mlgo import env
from mlgo.evaluation.runtime_programs import Program
from mlgo.policy import policy_io
from mlgo.util.toolchain import toolchain

CACHE_MISS_L1 = 10
CACHE_MISS_LL = 100
MISPREDICT = 15


CXX_EXTS = (".cc", ".cpp", ".cxx")
GUARD_RECORDS = "guard_records.json"


def _obj_name(rel: str) -> str:
  """Object file name of a unit: its path with / as _ (a generated unit: gen_NAME)."""
  if os.path.isabs(rel):
    return "gen_" + os.path.basename(rel) + ".o"
  return rel.replace("/", "_") + ".o"


def _compile_tu(src_root, rel, cflags, obj, problem, spec, weights, llvm_version, timeout,
                llc_flags=(), policy=None, clang_flags=(), guarded=False,
                policy_functions=None, candidates=(), no_more_spill_code=False, replay=None):
  """One translation unit: clang -O2 to bitcode, then llc with the allocator under test
  (`policy`, else the policy of spec/weights, else the default; guarded: a guarded
  compile of it, mlgo.env.guarded, which keeps the policy's allocation for exactly the
  functions in `policy_functions` when that is given, and chooses among the policy and
  `candidates` per function otherwise; guarded with `replay`, a guard's record of this
  unit: that guard's allocation made again in one compile). Returns (error | None, the
  compile's reward dict, the guard's record or None)."""
  tc = toolchain(llvm_version)
  bc = obj + ".bc"
  cc = tc.clangxx if rel.endswith(CXX_EXTS) else tc.clang
  r = subprocess.run([cc, "-O2", "-fPIC", "-w", "-c", "-emit-llvm"] + cflags +
                     list(clang_flags) + [rel, "-o", bc], cwd=src_root, capture_output=True,
                     text=True,
                     timeout=timeout)
  if r.returncode != 0:
    return f"clang failed on {rel}: {r.stderr[-300:]}", None, None
  if policy is None:
    policy = (policy_io.Policy(spec, weights) if spec is not None else env.CompilerDefault())
  module = env.LlcModule(rel, bc, ["-O2", "-relocation-model=pic"] + list(llc_flags))
  if guarded:
    from mlgo.env import guarded as guarded_lib  # pylint: disable=import-outside-toplevel
    if replay is not None:
      res = guarded_lib.replay_guarded(module, problem, policy, replay, candidates=candidates,
                                       llvm_version=llvm_version, timeout=timeout,
                                       output_path=obj)
      if not res.ok:
        return f"llc failed on {rel}: {res.reason}", None, None
      return None, res.reward, replay
    g = guarded_lib.guarded_compile(module, problem, policy, llvm_version=llvm_version,
                                    timeout=timeout, output_path=obj,
                                    policy_functions=policy_functions,
                                    candidates=candidates,
                                    no_more_spill_code=no_more_spill_code)
    if not g.ok:
      return f"llc failed on {rel}: {g.result.reason}", None, None
    return None, {"functions": g.scores, "total": float(sum(g.scores.values()))}, g.record()
  res = env.compile_module(module, problem, policy, llvm_version=llvm_version,
                           timeout=timeout, output_path=obj)
  if not res.ok:
    return f"llc failed on {rel}: {res.reason}", None, None
  return None, res.reward, None


def build_program(prog: Program, src_root, out_dir, problem, spec, weights, *, jobs=2,
                  llvm_version=22, timeout=600.0, llc_flags=(), policy=None, clang_flags=(),
                  link_flags=(), guarded=False, policy_functions=None, candidates=(),
                  no_more_spill_code=False, replay_from=None):
  """Builds `prog` into out_dir/<name>: every translation unit through llc with the
  allocator under test (policy, or spec/weights, or the default), extra llc_flags (and
  clang_flags for the -O2 bitcode, link_flags for the link, e.g. PGO's). The optimized
  bitcode stays beside each object (OBJ.bc); the per-function scores of `problem`'s
  reward go to out_dir/functions.json. guarded with policy_functions: a selected build
  (the policy's allocation for those functions only); guarded with candidates: per
  function the lowest cost among the default, the policy and the candidates
  (no_more_spill_code: the guard's rule of that name). A guarded build writes each unit's
  guard record to out_dir/guard_records.json; replay_from (guarded only): another build
  dir of the same program whose records this build makes again, one compile per unit."""
  out_dir = pathlib.Path(out_dir)
  out_dir.mkdir(parents=True, exist_ok=True)
  records = {}
  if replay_from is not None:
    rec_file = pathlib.Path(replay_from) / GUARD_RECORDS
    if not guarded or not rec_file.exists():
      raise ValueError(f"{prog.name}: replay_from={replay_from}: needs a guarded build and "
                       f"that build's {GUARD_RECORDS}")
    records = json.loads(rec_file.read_text())
    missing = [rel for rel in prog.sources if rel not in records]
    if missing:
      raise ValueError(f"{rec_file}: no guard record for {missing[:3]}")
  objs, functions = [], {}
  with cf.ProcessPoolExecutor(max_workers=max(1, jobs)) as ex:
    futs = []
    for rel in prog.sources:
      obj = str(out_dir / _obj_name(rel))
      objs.append(obj)
      futs.append(ex.submit(_compile_tu, str(src_root), rel, prog.cflags, obj, problem,
                            spec, weights, llvm_version, timeout, tuple(llc_flags), policy,
                            tuple(clang_flags), guarded,
                            None if policy_functions is None else frozenset(policy_functions),
                            tuple(candidates), no_more_spill_code, records.get(rel)))
    made = {}
    for rel, f in zip(prog.sources, futs):
      err, reward, record = f.result()
      if err:
        raise RuntimeError(f"{prog.name}: {err}")
      functions.update(reward.get("functions", {}))
      if record is not None:
        made[rel] = record
  (out_dir / "functions.json").write_text(json.dumps(functions, indent=0) + "\n")
  if guarded:
    (out_dir / GUARD_RECORDS).write_text(json.dumps(made, indent=0) + "\n")
  return link_program(prog, objs, out_dir / prog.name, llvm_version, link_flags)


def link_program(prog: Program, objs, exe, llvm_version=22, link_flags=(), layout=0):
  """Links `objs` into `exe`. layout 0: the objects in source order, nothing added.
  layout i > 0: the same objects in a shuffled order after a padding object that moves
  the code, constants and data by a few bytes to a few KB (layout_padding; run() also
  moves the stack): every address changes, no instruction does. Cachegrind's caches and
  branch predictor are indexed by address, so a one-layout comparison mixes the code's
  effect with where it landed."""
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
# again. 4: layouts also move code inside functions (code_layout_flags).
LAYOUT_RECIPE = 4


def code_layout_flags(layout: int) -> tuple:
  """llc flags for the code placement of layout `layout` > 0: every block that no block
  falls into aligned to 2^k bytes, k = 1 + (layout - 1) % 4. The padding before such a
  block is never executed. What moves is the offsets between a function's branches, and
  with them which branches share a counter of cachegrind's predictor (indexed by history
  and the low 7 address bits). Moving whole objects leaves those offsets alone, so
  without this two allocations of one function differ by their own aliasing luck in
  every layout (SELECTION_RULES.md, stop 73: up to 0.5% of a program's estimated cycles)."""
  if layout < 1:
    raise ValueError(f"code_layout_flags: layout {layout} is not an extra layout (>= 1)")
  return (f"-align-all-nofallthru-blocks={1 + (layout - 1) % 4}",)


def rebuild_layout(prog: Program, src_root, build_dir, recipe: dict, layout: int,
                   llvm_version=22):
  """build_dir's allocation made again with layout `layout`'s code placement
  (code_layout_flags) into build_dir/layout-<i>, then linked in that layout
  (relink_layout: build_dir/layout-<i>/layout-<i>/<program>). recipe: the keywords of
  build_program (problem, spec, weights and the rest) that made build_dir; a guarded
  build is replayed from its guard records, so every function keeps the allocation it
  has in build_dir (one compile per unit)."""
  build_dir = pathlib.Path(build_dir)
  kw = dict(recipe)
  kw["llc_flags"] = tuple(kw.get("llc_flags", ())) + code_layout_flags(layout)
  if kw.get("guarded"):
    kw["replay_from"] = build_dir
  dest = build_dir / f"layout-{layout}"
  build_program(prog, src_root, dest, **kw)
  return relink_layout(prog, dest, layout, llvm_version, kw.get("link_flags", ()))


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
  # The terms a register allocation changes by itself: instructions and data accesses.
  # Instruction-cache misses and the simulated branch predictor depend on where code
  # lies (cachegrind indexes them by address), which any rebuild moves.
  data_cycles = g("Ir") + CACHE_MISS_L1 * d1 + CACHE_MISS_LL * (g("DLmr") + g("DLmw"))
  return {"instructions": g("Ir"), "d1_misses": d1, "ll_misses": ll, "mispredicts": br,
          "cycles": cycles, "data_cycles": data_cycles}
