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
Programs (inputs are written by this module, nothing third-party is committed):
  lua     the lua5.4 interpreter running a project-written benchmark script
  bzip2   compressing a generated ~400 KB text file (output: the .bz2 bytes)
  lz4     compressing the same file (output: the .lz4 bytes)
  xxhsum  XXH128 of the same file (@unseen package xxhash)
  libdeflate-gzip  gzip -9 of the same file (@unseen package libdeflate)
"""
import concurrent.futures as cf
import dataclasses
import hashlib
import json
import os
import pathlib
import random
import re
import shutil
import subprocess
import sys
import tempfile

from mlgo import env
from mlgo import problems as problems_lib
from mlgo.policy import policy_io
from mlgo.util import cli
from mlgo.util.toolchain import toolchain

CACHE_MISS_L1 = 10
CACHE_MISS_LL = 100
MISPREDICT = 15

LUA_SCRIPT = r"""
-- mlgo runtime_check workload: tables, strings, closures, arithmetic.
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
local t = {}
for i = 1, 20000 do t[i] = (i * 7919) % 10007 end
table.sort(t)
local acc = 0
for i = 1, #t, 3 do acc = (acc + t[i] * i) % 1000003 end
local words = {}
for w in string.gmatch(string.rep("the quick brown fox jumps over the lazy dog ", 400), "%a+") do
  words[w] = (words[w] or 0) + 1
end
local keys = {}
for k in pairs(words) do keys[#keys + 1] = k end
table.sort(keys)
local parts = {}
for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. words[k] end
local function counter() local c = 0 return function() c = c + 1 return c end end
local c = counter()
for _ = 1, 50000 do c() end
local m = {}
for i = 1, 60 do m[i] = {} for j = 1, 60 do m[i][j] = (i * j) % 17 end end
local s = 0
for i = 1, 60 do for j = 1, 60 do for k = 1, 60, 7 do s = s + m[i][k] * m[k][j] end end end
print(fib(22), acc, table.concat(parts, ","), c(), s, string.format("%.3f", math.sqrt(acc)))
"""


@dataclasses.dataclass
class Program:
  name: str
  package: str
  sources: list          # relative to the package source root
  cflags: list
  libs: list
  args: list             # with {input} / {output} / {script} placeholders
  output_file: str | None


PROGRAMS = [
    Program("lua", "lua5.4",
            [f"src/{f}.c" for f in (
                "lapi lauxlib lbaselib lcode lcorolib lctype ldblib ldebug ldo ldump lfunc "
                "lgc linit liolib llex lmathlib lmem loadlib lobject lopcodes loslib lparser "
                "lstate lstring lstrlib ltable ltablib ltm lua lundump lutf8lib lvm lzio"
            ).split()],
            ["-DLUA_COMPAT_5_3", "-DLUA_USE_LINUX", "-Isrc"], ["-lm", "-ldl"],
            ["{script}"], None),
    Program("bzip2", "bzip2",
            [f"{f}.c" for f in "blocksort huffman crctable randtable compress decompress "
             "bzlib bzip2".split()],
            ["-D_FILE_OFFSET_BITS=64", "-I."], [], ["-c", "-9", "{input}"], None),
    Program("lz4", "lz4",
            ["programs/lz4cli.c", "programs/lz4io.c", "programs/bench.c",
             "programs/datagen.c", "lib/lz4.c", "lib/lz4hc.c", "lib/lz4frame.c",
             "lib/xxhash.c"],
            ["-Ilib", "-Iprograms", "-DXXH_NAMESPACE=LZ4_"], ["-lpthread"],
            ["-9", "-c", "{input}"], None),
    # From the @unseen packages (never trained on): a hash and a DEFLATE compressor.
    Program("xxhsum", "xxhash",
            ["cli/xxhsum.c", "cli/xsum_os_specific.c", "cli/xsum_output.c",
             "cli/xsum_sanity_check.c", "cli/xsum_bench.c", "xxhash.c"],
            ["-I.", "-Icli"], [], ["-H2", "{input}"], None),
    Program("libdeflate-gzip", "libdeflate",
            ["programs/gzip.c", "programs/prog_util.c", "programs/tgetopt.c"]
            + [f"lib/{f}.c" for f in "deflate_compress deflate_decompress utils crc32 adler32 "
               "gzip_compress gzip_decompress zlib_compress zlib_decompress".split()]
            + ["lib/x86/cpu_features.c"],
            ["-I.", "-D_FILE_OFFSET_BITS=64"], [], ["-c", "-9", "{input}"], None),
]


def make_input(path, size=400_000, seed=7):
  """Deterministic text-like data (words with skewed frequencies), compressible."""
  rng = random.Random(seed)
  vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
           for _ in range(2000)]
  weights = [1.0 / (i + 1) for i in range(len(vocab))]
  out = []
  n = 0
  while n < size:
    line = " ".join(rng.choices(vocab, weights, k=rng.randint(4, 14))) + "\n"
    out.append(line)
    n += len(line)
  pathlib.Path(path).write_text("".join(out)[:size])


def _compile_tu(src_root, rel, cflags, obj, problem, spec, weights, llvm_version, timeout,
                llc_flags=(), policy=None):
  """One translation unit: clang -O2 to bitcode, then llc with the allocator under test
  (`policy`, else the policy of spec/weights, else the default). Returns (error | None,
  the compile's reward dict)."""
  tc = toolchain(llvm_version)
  bc = obj + ".bc"
  r = subprocess.run([tc.clang, "-O2", "-fPIC", "-w", "-c", "-emit-llvm"] + cflags +
                     [rel, "-o", bc], cwd=src_root, capture_output=True, text=True,
                     timeout=timeout)
  if r.returncode != 0:
    return f"clang failed on {rel}: {r.stderr[-300:]}", None
  if policy is None:
    policy = (policy_io.Policy(spec, weights) if spec is not None else env.CompilerDefault())
  res = env.compile_module(env.LlcModule(rel, bc, ["-O2", "-relocation-model=pic"]), problem,
                           policy, llvm_version=llvm_version, timeout=timeout,
                           output_path=obj, extra_flags=list(llc_flags))
  if not res.ok:
    return f"llc failed on {rel}: {res.reason}", None
  return None, res.reward


def build_program(prog: Program, src_root, out_dir, problem, spec, weights, *, jobs=2,
                  llvm_version=22, timeout=600.0, llc_flags=(), policy=None):
  """Builds `prog` into out_dir/<name>: every translation unit through llc with the
  allocator under test (policy, or spec/weights, or the default), extra llc_flags. The
  per-function scores of `problem`'s reward go to out_dir/functions.json."""
  out_dir = pathlib.Path(out_dir)
  out_dir.mkdir(parents=True, exist_ok=True)
  objs, functions = [], {}
  with cf.ProcessPoolExecutor(max_workers=max(1, jobs)) as ex:
    futs = []
    for rel in prog.sources:
      obj = str(out_dir / (rel.replace("/", "_") + ".o"))
      objs.append(obj)
      futs.append(ex.submit(_compile_tu, str(src_root), rel, prog.cflags, obj, problem,
                            spec, weights, llvm_version, timeout, tuple(llc_flags), policy))
    for f in futs:
      err, reward = f.result()
      if err:
        raise RuntimeError(f"{prog.name}: {err}")
      functions.update(reward.get("functions", {}))
  (out_dir / "functions.json").write_text(json.dumps(functions, indent=0) + "\n")
  exe = out_dir / prog.name
  tc = toolchain(llvm_version)
  r = subprocess.run([tc.clang, "-pie", "-o", str(exe)] + objs + prog.libs,
                     capture_output=True, text=True)
  if r.returncode != 0:
    raise RuntimeError(f"{prog.name}: link failed: {r.stderr[-500:]}")
  return exe


def cachegrind(exe, args, cwd, out_file):
  """Runs `exe args` under cachegrind; returns (stdout bytes, {event: count})."""
  vg = shutil.which("valgrind")
  if not vg:
    raise RuntimeError("valgrind not found; `apt-get install valgrind`")
  r = subprocess.run([vg, "--tool=cachegrind", "--cache-sim=yes", "--branch-sim=yes",
                      f"--cachegrind-out-file={out_file}", str(exe)] + list(args),
                     cwd=cwd, capture_output=True, timeout=3600)
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


def write_workload(out: pathlib.Path):
  """The programs' inputs under `out`: (text input, lua script)."""
  inp = out / "input.txt"
  make_input(inp)
  script = out / "bench.lua"
  script.write_text(LUA_SCRIPT)
  return inp, script


def program_args(prog: Program, inp, script) -> list:
  return [a.format(input=str(inp), script=str(script)) for a in prog.args]


def prepare_program(prog: Program, out: pathlib.Path):
  """(prog with its generated-header dir in cflags, source root): the package's Debian
  source (fetched once) and the headers a Debian build generates first (e.g. lua's
  multiarch header) under out/<program>/gen."""
  from mlgo.corpus import source_tree, sources  # pylint: disable=import-outside-toplevel
  src = sources.fetch_source(prog.package, cli.mlgo_home() / "sources")
  gen = out / prog.name / "gen"
  gen.mkdir(parents=True, exist_ok=True)
  for hname, text in source_tree.PACKAGE_HEADERS.get(prog.package, {}).items():
    (gen / hname).write_text(text)
  return dataclasses.replace(prog, cflags=prog.cflags + [f"-I{gen}"]), src


def run(problem: str, policy_dir, out_dir, *, programs=None, jobs: int = 2,
        llvm_version: int = 22, stream=sys.stderr) -> list:
  pol = policy_io.load_policy(policy_dir)
  if not problems_lib.same_decisions(pol.problem, problem):
    raise ValueError(f"{policy_dir}: policy is for {pol.problem}, not {problem}")
  out = pathlib.Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  inp, script = write_workload(out)
  rows = []
  for prog in PROGRAMS:
    if programs and prog.name not in programs:
      continue
    prog, src = prepare_program(prog, out)
    res = {}
    for variant, spec, w in (("default", None, None), ("policy", pol.spec, pol.arch.w)):
      print(f"runtime_check: building {prog.name} ({variant})", file=stream, flush=True)
      exe = build_program(prog, src, out / prog.name / variant, problem, spec, w, jobs=jobs,
                          llvm_version=llvm_version)
      args = program_args(prog, inp, script)
      print(f"runtime_check: running {prog.name} ({variant}) under cachegrind", file=stream,
            flush=True)
      stdout, ev = cachegrind(exe, args, out, out / prog.name / f"cachegrind.{variant}")
      res[variant] = (hashlib.sha256(stdout).hexdigest(), metrics(ev), len(stdout))
    same = res["default"][0] == res["policy"][0]
    if not same:
      raise RuntimeError(f"{prog.name}: the policy build's output differs from the default "
                         f"build's; refusing to report numbers")
    rows.append({"program": prog.name, "output_bytes": res["default"][2],
                 "default": res["default"][1], "policy": res["policy"][1]})
  return rows


def format_table(rows) -> str:
  keys = ("instructions", "d1_misses", "ll_misses", "mispredicts", "cycles")
  lines = [f"{'program':8s} {'metric':13s} {'default':>14s} {'policy':>14s} {'change':>8s}"]
  for r in rows:
    for k in keys:
      d, p = r["default"][k], r["policy"][k]
      ch = (p / d - 1) * 100 if d else 0.0
      lines.append(f"{r['program']:8s} {k:13s} {d:14d} {p:14d} {ch:+7.2f}%")
  worse = [r["program"] for r in rows if r["policy"]["cycles"] > r["default"]["cycles"]]
  better = [r["program"] for r in rows if r["policy"]["cycles"] < r["default"]["cycles"]]
  lines.append(f"outputs identical on all {len(rows)} programs; estimated cycles better on "
               f"{len(better)} ({', '.join(better) or '-'}), worse on {len(worse)} "
               f"({', '.join(worse) or '-'})")
  return "\n".join(lines)
