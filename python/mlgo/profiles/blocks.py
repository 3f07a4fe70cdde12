"""Machine basic blocks of an executable and their measured costs.

`disassemble` runs llvm-objdump on the executable and cuts every function into blocks: a
block starts at the function's entry, at every target of a jump inside the function and
after every jump, return or trap. Each block gets static features read from its AT&T
instructions: count, bytes, loads and stores (a memory operand as source or destination),
stack spills and reloads (stores to / loads from %rsp- or %rbp-based slots: what the
register allocator adds), calls, branches. `join` adds a profile's self costs
(mlgo.profiles.callgrind) of each block's instructions; a block's executions are the Ir
count of its first instruction.
"""
import dataclasses
import re
import subprocess

import numpy as np

FEATURES = ("instructions", "bytes", "loads", "stores", "spills", "reloads", "calls",
            "branches")

_FUNC = re.compile(r"^([0-9a-f]+) <(.+)>:$")
_INSN = re.compile(r"^\s*([0-9a-f]+):\s+((?:[0-9a-f]{2} )+)\s*\t(\S+)(?:\t(.*))?$")
_TARGET = re.compile(r"^(?:0x)?([0-9a-f]+) <")
_ENDS_BLOCK = ("ret", "jmp", "ud2", "hlt")


@dataclasses.dataclass
class Block:
  function: str
  start: int               # address of its first instruction
  instructions: list       # [(address, size, mnemonic, operands)]

  def features(self) -> dict:
    f = dict.fromkeys(FEATURES, 0)
    for _, size, mnem, ops in self.instructions:
      f["instructions"] += 1
      f["bytes"] += size
      mem = [o for o in _operands(ops) if "(" in o]
      if mnem.startswith("call"):
        f["calls"] += 1
        continue
      if mnem.startswith("j"):
        f["branches"] += 1
        continue
      if not mem or mnem.startswith("lea") or mnem.startswith("nop"):
        continue
      ops_l = _operands(ops)
      dst_mem = "(" in ops_l[-1]
      stack = any(re.search(r"\(%[re](sp|bp)\)", o) for o in mem)
      if dst_mem:
        f["stores"] += 1
        f["spills"] += stack and mnem.startswith("mov")
      else:
        f["loads"] += 1
        f["reloads"] += stack and mnem.startswith("mov")
    return f


def _operands(ops: str) -> list:
  """AT&T operands, split on commas outside parentheses."""
  out, depth, cur = [], 0, ""
  for ch in ops or "":
    if ch == "(":
      depth += 1
    elif ch == ")":
      depth -= 1
    if ch == "," and depth == 0:
      out.append(cur.strip())
      cur = ""
    else:
      cur += ch
  if cur.strip():
    out.append(cur.strip())
  return out


def parse_disassembly(text: str, name: str = "<objdump>") -> list:
  """Blocks of llvm-objdump -d output (raw bytes shown), in address order."""
  funcs = []
  for line in text.splitlines():
    m = _FUNC.match(line)
    if m:
      funcs.append((m.group(2), []))
      continue
    m = _INSN.match(line)
    if m and funcs:
      size = len(m.group(2).split())
      funcs[-1][1].append((int(m.group(1), 16), size, m.group(3), m.group(4) or ""))
  if not funcs:
    raise ValueError(f"{name}: no functions in the disassembly")
  blocks = []
  for fname, insns in funcs:
    if not insns:
      continue
    addrs = {a for a, *_ in insns}
    starts = {insns[0][0]}
    for i, (a, size, mnem, ops) in enumerate(insns):
      if mnem.startswith("j"):
        t = _TARGET.match(ops.strip())
        if t and int(t.group(1), 16) in addrs:
          starts.add(int(t.group(1), 16))
      if (mnem.startswith("j") or mnem.startswith(_ENDS_BLOCK)) and i + 1 < len(insns):
        starts.add(insns[i + 1][0])
    cur = None
    for ins in insns:
      if ins[0] in starts:
        cur = Block(fname, ins[0], [])
        blocks.append(cur)
      cur.instructions.append(ins)
  return blocks


def disassemble(exe: str, objdump: str = "llvm-objdump-22") -> list:
  try:
    out = subprocess.run([objdump, "-d", exe], check=True, capture_output=True, text=True)
  except subprocess.CalledProcessError as e:
    raise ValueError(f"{exe}: {objdump} failed: {e.stderr.strip()[-300:]}") from e
  return parse_disassembly(out.stdout, exe)


def join(blocks, profile, obj: str) -> list:
  """One row per block of `obj` (the profile's object name) that the profile saw run:
  {"function", "start", features..., "executions", each event's total}."""
  rows = []
  ir = profile.column("Ir")
  for b in blocks:
    tot = None
    first = profile.costs.get((obj, b.start))
    for a, *_ in b.instructions:
      c = profile.costs.get((obj, a))
      if c is not None:
        tot = c.copy() if tot is None else tot + c
    if tot is None:
      continue
    row = {"function": b.function, "start": b.start, **b.features(),
           "executions": int(first[ir]) if first is not None else 0}
    row.update({e: int(v) for e, v in zip(profile.events, tot)})
    rows.append(row)
  if not rows:
    raise ValueError(f"no block of {obj} has profile costs: is {obj!r} the profiled "
                     f"object? (profile objects: "
                     f"{sorted({o for o, _ in profile.costs})[:4]})")
  return rows


def executed_fraction(rows, profile, obj: str) -> float:
  """Share of the profile's Ir in `obj` that the rows account for (1.0: every costed
  address fell inside a disassembled block)."""
  ir = profile.column("Ir")
  total = sum(int(c[ir]) for (o, _), c in profile.costs.items() if o == obj)
  return float(np.sum([r["Ir"] for r in rows])) / total if total else 0.0


def profile_run(exe, args, cwd, out_file, timeout: float = 3600.0):
  """Runs `exe args` under callgrind (per-instruction costs, cache and branch
  simulation); returns (stdout bytes, parsed profile)."""
  import shutil  # pylint: disable=import-outside-toplevel
  from mlgo.profiles import callgrind  # pylint: disable=import-outside-toplevel
  vg = shutil.which("valgrind")
  if not vg:
    raise RuntimeError("valgrind not found; `apt-get install valgrind`")
  r = subprocess.run([vg, "--tool=callgrind", "--dump-instr=yes", "--cache-sim=yes",
                      "--branch-sim=yes", f"--callgrind-out-file={out_file}", str(exe)]
                     + list(args), cwd=cwd, capture_output=True, timeout=timeout)
  if r.returncode != 0:
    raise RuntimeError(f"{exe} exited with {r.returncode} under callgrind: "
                       f"{r.stderr.decode('utf-8', 'replace')[-500:]}")
  return r.stdout, callgrind.parse(out_file)
