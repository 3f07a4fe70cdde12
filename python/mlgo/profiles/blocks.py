"""Machine basic blocks of an executable or object and their measured costs.

`disassemble` runs llvm-objdump and cuts every function into blocks. Where the binary
carries the compiler's basic-block address map (mlgo.profiles.bbmap), the blocks are
exactly llc's MachineBasicBlocks, each with its static frequency relative to the entry;
otherwise a block starts at the function's entry, at every target of a jump inside the
function and after every jump, return or trap. Each block gets static features read from
its AT&T instructions: count, bytes, loads and stores (a memory operand as source or
destination), stack spills and reloads (movs to / from %rsp- or %rbp-based slots: what
the register allocator adds), other instructions that read or write a stack slot
(folded spill code), register-to-register copies, pushes and pops (callee-saved
registers), calls, branches. `join` adds a profile's self costs (mlgo.profiles.callgrind)
of each block's instructions; a block's executions are the Ir count of its first
instruction.
"""
import dataclasses
import re
import subprocess

import numpy as np

FEATURES = ("instructions", "bytes", "loads", "stores", "spills", "reloads", "calls",
            "branches", "stack_folded", "copies", "push_pop")

_FUNC = re.compile(r"^([0-9a-f]+) <(.+)>:$")
_INSN = re.compile(r"^\s*([0-9a-f]+):\s+((?:[0-9a-f]{2} )+)\s*\t(\S+)(?:\t(.*))?$")
_TARGET = re.compile(r"^(?:0x)?([0-9a-f]+) <")
_ENDS_BLOCK = ("ret", "jmp", "ud2", "hlt")


_REG = re.compile(r"^%[a-z0-9]+$")
_STACK = re.compile(r"\(%[re](sp|bp)\)")


@dataclasses.dataclass
class Block:
  function: str
  start: int               # address of its first instruction
  instructions: list       # [(address, size, mnemonic, operands)]
  mbb: int | None = None   # llc's MachineBasicBlock number (from the address map)
  rel_freq: float | None = None   # static frequency relative to the entry (address map)

  def features(self) -> dict:
    f = dict.fromkeys(FEATURES, 0)
    for _, size, mnem, ops in self.instructions:
      f["instructions"] += 1
      f["bytes"] += size
      ops_l = _operands(ops)
      mem = [o for o in ops_l if "(" in o]
      if mnem.startswith("call"):
        f["calls"] += 1
        continue
      if mnem.startswith("j"):
        f["branches"] += 1
        continue
      if mnem.startswith(("push", "pop")):
        f["push_pop"] += 1
        continue
      if not mem:
        if (mnem.startswith("mov") and len(ops_l) == 2
            and all(_REG.match(o) for o in ops_l)):
          f["copies"] += 1
        continue
      if mnem.startswith("lea") or mnem.startswith("nop"):
        continue
      dst_mem = "(" in ops_l[-1]
      stack = any(_STACK.search(o) for o in mem)
      is_mov = mnem.startswith("mov")
      if dst_mem:
        f["stores"] += 1
        f["spills"] += stack and is_mov
      else:
        f["loads"] += 1
        f["reloads"] += stack and is_mov
      f["stack_folded"] += stack and not is_mov
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


def _functions(text: str, name: str, allow_empty: bool = False) -> list:
  """[(function, start address, instructions)] of llvm-objdump -d output."""
  funcs = []
  for line in text.splitlines():
    m = _FUNC.match(line)
    if m:
      funcs.append((m.group(2), int(m.group(1), 16), []))
      continue
    m = _INSN.match(line)
    if m and funcs:
      size = len(m.group(2).split())
      funcs[-1][2].append((int(m.group(1), 16), size, m.group(3), m.group(4) or ""))
  if not funcs and not allow_empty:
    raise ValueError(f"{name}: no functions in the disassembly")
  return funcs


def parse_disassembly(text: str, name: str = "<objdump>", maps=None,
                      allow_empty: bool = False) -> list:
  """Blocks of llvm-objdump -d output (raw bytes shown), in address order. With `maps`
  (mlgo.profiles.bbmap.MapFunction list of the same binary), the functions the map
  covers are cut at llc's MachineBasicBlocks (instructions outside every block, i.e.
  alignment padding, are dropped); the others by the jump rule. allow_empty: an object
  without functions (only data) has no blocks, instead of a ValueError."""
  funcs = _functions(text, name, allow_empty)
  by_addr, by_name = {}, {}
  for mf in maps or ():
    by_addr[(mf.name, mf.start)] = mf
    by_name.setdefault(mf.name, []).append(mf)
  blocks = []
  for fname, fstart, insns in funcs:
    if not insns:
      continue
    mf = by_addr.get((fname, fstart))
    if mf is None and len(by_name.get(fname, ())) == 1:
      mf = by_name[fname][0]   # an object with one section per function
    if mf is not None:
      blocks.extend(_cut_by_map(fname, insns, mf, fstart))
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


def _cut_by_map(fname, insns, mf, fstart) -> list:
  # Map addresses are relative to the map's function start; objdump's to its symbol.
  shift = fstart - mf.start
  out, i = [], 0
  for mb in mf.blocks:   # address order
    lo, hi = mb.start + shift, mb.start + shift + mb.size
    while i < len(insns) and insns[i][0] < lo:
      i += 1
    b = Block(fname, lo, [], mbb=mb.mbb, rel_freq=mb.rel_freq)
    while i < len(insns) and insns[i][0] < hi:
      b.instructions.append(insns[i])
      i += 1
    if b.instructions:
      out.append(b)
  return out


def disassemble(exe: str, objdump: str = "llvm-objdump-22", use_map: bool = True,
                allow_empty: bool = False) -> list:
  """Blocks of `exe` (an executable or object); llc's own blocks where it carries an
  address map (and use_map), else the jump rule. allow_empty: as parse_disassembly."""
  try:
    out = subprocess.run([objdump, "-d", str(exe)], check=True, capture_output=True,
                         text=True)
  except subprocess.CalledProcessError as e:
    raise ValueError(f"{exe}: {objdump} failed: {e.stderr.strip()[-300:]}") from e
  maps = None
  if use_map:
    from mlgo.profiles import bbmap  # pylint: disable=import-outside-toplevel
    try:
      maps = bbmap.read(exe, objdump.replace("objdump", "readobj"))
    except bbmap.MapError:
      maps = None
  return parse_disassembly(out.stdout, str(exe), maps, allow_empty)


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
    if b.mbb is not None:
      row.update(mbb=b.mbb, rel_freq=b.rel_freq)
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
