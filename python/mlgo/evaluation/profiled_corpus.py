"""A training corpus whose block frequencies are measured, not guessed.

The performance-model reward weighs each block by llc's block frequency. In an ordinary
corpus module that frequency is a static estimate, and the perf_model report shows it
is the reward's weak link. The runtime_check programs of role "model" can be run, so
their translation units can carry real profiles:
  1. build the program with -fprofile-instr-generate and run its workload;
  2. merge the raw profile (llvm-profdata);
  3. compile every unit at -O2 with -fprofile-instr-use: the optimized bitcode carries
     the measured branch weights, from which llc's block frequencies (the policy's
     features and the address map the reward reads) follow.
The result is a prepared llc corpus (mlgo.env.prepared format: manifest.json + bc/) that
every tool takes with --corpus=DIR. Only "model" programs go in, so the held-out
programs stay unseen by the policy as well as by the cost model. Resumable per program.
"""
import glob
import json
import os
import pathlib
import shutil
import subprocess
import sys

from mlgo import env
from mlgo.env import prepared
from mlgo.evaluation import runtime_build as rb
from mlgo.evaluation import runtime_programs as rp
from mlgo.util.files import write_json_atomic
from mlgo.util.toolchain import toolchain


def profile_program(prog, src, work: pathlib.Path, inp, script, jobs,
                    llvm_version) -> pathlib.Path:
  """The merged profile of one run of `prog`'s workload (work/PROG.profdata). The
  workload runs in work's parent directory, where write_workload put its inputs."""
  prof = work / f"{prog.name}.profdata"
  if prof.exists():
    return prof
  flags = ["-fprofile-instr-generate"]
  exe = rb.build_program(prog, src, work / "instrumented", "regalloc_eviction", None, None,
                         jobs=jobs, llvm_version=llvm_version, clang_flags=flags,
                         link_flags=flags)
  raw = work / "raw"
  shutil.rmtree(raw, ignore_errors=True)
  raw.mkdir()
  r = subprocess.run([str(exe)] + rp.program_args(prog, inp, script), cwd=work.parent,
                     capture_output=True, timeout=3600,
                     env=dict(os.environ, LLVM_PROFILE_FILE=str(raw / "%p.profraw")))
  if r.returncode != 0:
    raise RuntimeError(f"{prog.name}: the instrumented build exited with {r.returncode}: "
                       f"{r.stderr.decode('utf-8', 'replace')[-300:]}")
  raws = sorted(glob.glob(str(raw / "*.profraw")))
  if not raws:
    raise RuntimeError(f"{prog.name}: the instrumented run wrote no profile")
  profdata = toolchain(llvm_version).bin_dir + "/llvm-profdata"
  tmp = prof.with_suffix(".tmp")
  subprocess.run([profdata, "merge", "-o", str(tmp)] + raws, check=True, capture_output=True)
  os.replace(tmp, prof)
  return prof


def build(out_dir, *, role: str = "model", programs=None, jobs: int = 2,
          llvm_version: int = 22, stream=sys.stderr) -> prepared.PreparedCorpus:
  out = pathlib.Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  inp, script = rp.write_workload(out / "work")
  llc_flags = ["-O2", "-relocation-model=pic"]
  modules, failures = [], {}
  for prog in rp.select(programs, role):
    done = out / "work" / prog.name / "modules.json"
    if done.exists():
      modules += json.loads(done.read_text())
      continue
    prog, src = rp.prepare_program(prog, out / "work")
    work = out / "work" / prog.name
    print(f"profiled_corpus: {prog.name}: instrumented build and run", file=stream, flush=True)
    prof = profile_program(prog, src, work, inp, script, jobs, llvm_version)
    print(f"profiled_corpus: {prog.name}: -O2 with the profile", file=stream, flush=True)
    pgo = work / "pgo"
    rb.build_program(prog, src, pgo, "regalloc_eviction", None, None, jobs=jobs,
                     llvm_version=llvm_version, clang_flags=[f"-fprofile-instr-use={prof}"])
    mods = []
    for rel in prog.sources:
      unit = rb._obj_name(rel)[:-2]   # pylint: disable=protected-access
      name = f"{prog.name}/{unit}"
      bc = out / "bc" / prog.name / (unit + ".bc")
      bc.parent.mkdir(parents=True, exist_ok=True)
      shutil.copyfile(pgo / (unit + ".o.bc"), bc)
      # The remarks reward's default scores, as prepared corpora record them.
      res = env.compile_module(env.LlcModule(name, str(bc), llc_flags), "regalloc_eviction",
                               env.CompilerDefault(), llvm_version=llvm_version)
      if not res.ok:
        failures[name] = res.reason
        continue
      mods.append({"name": name, "bc": os.path.relpath(bc, out), "llc_flags": llc_flags,
                   "package": prog.package, "language": "c++" if prog.cxx else "c",
                   "split": "train", "baseline": res.reward["functions"]})
    write_json_atomic(done, mods)
    modules += mods
  write_json_atomic(out / "manifest.json", {
      "version": prepared.PREPARE_VERSION, "corpus": f"profiled runtime_check programs "
      f"(role {role})", "llvm_version": llvm_version, "opt_level": "O2",
      "modules": modules, "failures": failures})
  print(f"profiled_corpus: {len(modules)} modules of {len({m['package'] for m in modules})} "
        f"programs in {out}, {len(failures)} failed", file=stream, flush=True)
  return prepared.load_prepared(out)
