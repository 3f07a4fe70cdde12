"""Re-records the raw interactive-channel streams in this directory.

  PYTHONPATH=python python testdata/streams/record.py      (from the repository root)

Each NAME.bin is exactly the bytes the compiler wrote to BASE.out during one compile of
a project-written program in testdata/programs, answered with the default (inlining) or
default-equivalent (regalloc) policy:
  inlining-clang{22,19}.bin           clang-N -cc1 at -Oz of calls.c (pre-optimization
                                      bitcode made with -Xclang -disable-llvm-passes)
  regalloc_eviction-llc{22,19}.bin    llc-N -O2 of `clang-N -O2 -emit-llvm` small_pressure.c
                                      (LLVM 19: small_pressure17.c)
  regalloc_priority-llc{22,19}.bin    same, priority channel
  manifest.json                       per stream: command summary, decisions, reward
"""
import json
import os
import pathlib
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "python"))

from mlgo import env  # noqa: E402  pylint: disable=wrong-import-position

PROGRAMS = ROOT / "testdata" / "programs"
RECORDINGS = [
    ("inlining", "calls.c"),
    ("regalloc_eviction", "small_pressure.c"),
    ("regalloc_priority", "small_pressure.c"),
]


def main():
  manifest = {}
  with tempfile.TemporaryDirectory() as tmp:
    for version in (22, 19):
      for problem, program in RECORDINGS:
        if problem == "regalloc_eviction" and version == 19:
          program = "small_pressure17.c"  # LLVM 19 evicts nothing in small_pressure.c
        src = str(PROGRAMS / program)
        if problem == "inlining":
          module = env.module_from_source(src, tmp, llvm_version=version, opt="Oz")
          tool = f"clang{version}"
        else:
          module = env.modules.optimized_module_from_source(src, tmp, llvm_version=version)
          tool = f"llc{version}"
        name = f"{problem}-{tool}.bin"
        res = env.compile_module(module, problem, env.DefaultPolicy(problem),
                                 llvm_version=version, record_path=str(HERE / name))
        if not res.ok:
          raise SystemExit(f"{name}: {res.reason}")
        manifest[name] = {"problem": problem, "program": program, "llvm_version": version,
                          "policy": "default", "decisions": res.decisions,
                          "contexts": [t.context for t in res.trajectories],
                          "actions": [int(a) if problem != "regalloc_priority" else float(a)
                                      for t in res.trajectories for a in t.actions],
                          "reward": res.reward}
        print(name, os.path.getsize(HERE / name), "bytes,", res.decisions, "decisions")
  with open(HERE / "manifest.json", "w") as f:
    json.dump(manifest, f, indent=1, sort_keys=True)
    f.write("\n")


if __name__ == "__main__":
  main()
