"""Loop nests of machine code, and the spill code inside them, read from an object.

The static guard (mlgo.env.guarded) judges allocations by spill code weighted with LLVM's
estimated block frequencies. Inside a loop those estimates rest on branch probabilities
that are often wrong; that code is in a loop at all is not an estimate. So a guard rule
can ask that an allocation put no more spill code into loops than the default's, at
every nesting depth, whatever the frequencies say.

Blocks are cut by the jump rule (mlgo.profiles.blocks); successors are the direct jump
targets inside the function and the next block unless the block ends in an
unconditional jump, a return or a trap (an indirect jump adds no edge). Loops are the
natural loops of the back edges (an edge to a block that dominates its source); a
block's depth is the number of distinct loop headers whose loop holds it. Blocks the
entry does not reach (padding after a return) are at depth 0.
"""
from mlgo.profiles import blocks as blocks_lib

# The disassembly's jump-target syntax and the instructions after which no fallthrough
# follows: the jump rule's own (mlgo.profiles.blocks).
_TARGET = blocks_lib._TARGET  # pylint: disable=protected-access
_NO_FALLTHROUGH = blocks_lib._ENDS_BLOCK  # pylint: disable=protected-access


def _successors(blocks) -> list:
  index = {b.start: i for i, b in enumerate(blocks)}
  succ = []
  for i, b in enumerate(blocks):
    out = []
    _, _, mnem, ops = b.instructions[-1]
    if mnem.startswith("j"):
      t = _TARGET.match(ops.strip())
      if t and int(t.group(1), 16) in index:
        out.append(index[int(t.group(1), 16)])
    if not mnem.startswith(_NO_FALLTHROUGH) and i + 1 < len(blocks):
      out.append(i + 1)
    succ.append(sorted(set(out)))
  return succ


def _predecessors(succ) -> list:
  preds = [[] for _ in succ]
  for i, ss in enumerate(succ):
    for s in ss:
      preds[s].append(i)
  return preds


def _dominators(succ, preds) -> list:
  """dom[i]: the set of blocks dominating block i (None: unreachable from block 0)."""
  n = len(succ)
  order, seen, stack = [], {0}, [(0, iter(succ[0]))]
  while stack:   # reverse postorder from the entry
    node, it = stack[-1]
    nxt = next((s for s in it if s not in seen), None)
    if nxt is None:
      order.append(node)
      stack.pop()
    else:
      seen.add(nxt)
      stack.append((nxt, iter(succ[nxt])))
  order.reverse()
  dom = [None] * n
  dom[0] = {0}
  changed = True
  while changed:
    changed = False
    for i in order[1:]:
      ps = [dom[p] for p in preds[i] if dom[p] is not None]
      new = set.intersection(*ps) | {i} if ps else {i}
      if new != dom[i]:
        dom[i], changed = new, True
  return dom


def loop_depths(blocks) -> list:
  """The loop depth of each block of one function (blocks in address order)."""
  if not blocks:
    return []
  succ = _successors(blocks)
  preds = _predecessors(succ)
  dom = _dominators(succ, preds)
  bodies = {}   # header -> blocks of its (merged) natural loop
  for u, ss in enumerate(succ):
    for h in ss:
      if dom[u] is not None and h in dom[u]:   # a back edge u -> h
        body = bodies.setdefault(h, {h})
        work = [u]
        while work:
          x = work.pop()
          if x not in body:
            body.add(x)
            work.extend(p for p in preds[x] if dom[p] is not None)
  depth = [0] * len(blocks)
  for body in bodies.values():
    for x in body:
      depth[x] += 1
  return depth


def spill_code_in_loops(obj, objdump: str = "llvm-objdump-22") -> dict:
  """{function: {"loop_depth_D": spill code in blocks at depth >= D, for D = 1..max}} of
  an object; spill code is a block's movs to and from stack slots plus its other stack
  operands (blocks_lib features spills + reloads + stack_folded). A function without
  loops maps to {}; an object without functions (only data) gives {}."""
  by_fn = {}
  for b in blocks_lib.disassemble(obj, objdump, use_map=False, allow_empty=True):
    by_fn.setdefault(b.function, []).append(b)
  out = {}
  for fn, bl in by_fn.items():
    depths = loop_depths(bl)
    counts = {}
    for b, d in zip(bl, depths):
      f = b.features()
      code = f["spills"] + f["reloads"] + f["stack_folded"]
      for k in range(1, d + 1):
        counts[f"loop_depth_{k}"] = counts.get(f"loop_depth_{k}", 0) + code
    out[fn] = counts
  return out


# The allocator's spill code as the remarks cost weighs it (mlgo.problems.regalloc's
# COUNT_WEIGHTS): a reload four times a store; an instruction with a stack operand that
# is not a mov is counted as a folded reload (most folds read the slot); a register copy
# a fifth.
SPILL_CODE_WEIGHTS = {"spills": 1.0, "reloads": 4.0, "stack_folded": 4.0, "copies": 0.2}


def spill_cost_by_depth(obj, objdump: str = "llvm-objdump-22", max_depth: int = 4) -> dict:
  """{function: [cost at loop depth 0, 1, ..., max_depth]} of an object compiled with
  llc's basic-block address map (mlgo.profiles.bbmap.FLAGS_LLC): each llc block's
  weighted spill code (SPILL_CODE_WEIGHTS) times its static frequency relative to the
  entry, summed by the loop depth of the block's first instruction (deeper blocks count
  at max_depth). Depths come from the jump rule's blocks, whose every jump ends a block
  (an llc block may end in two jumps); frequencies from llc's blocks. A ValueError if
  the object has functions but no frequencies."""
  mbbs = blocks_lib.disassemble(obj, objdump, use_map=True, allow_empty=True)
  if mbbs and not any(b.rel_freq is not None for b in mbbs):
    raise ValueError(f"{obj}: no basic-block address map with frequencies")
  depth_at = {}
  by_fn = {}
  for b in blocks_lib.disassemble(obj, objdump, use_map=False, allow_empty=True):
    by_fn.setdefault(b.function, []).append(b)
  for fn, bl in by_fn.items():
    for b, d in zip(bl, loop_depths(bl)):
      for ins in b.instructions:
        depth_at[(fn, ins[0])] = d
  out = {}
  for b in mbbs:
    costs = out.setdefault(b.function, [0.0] * (max_depth + 1))
    f = b.features()
    code = sum(w * f[k] for k, w in SPILL_CODE_WEIGHTS.items())
    if code and b.rel_freq:
      d = min(max_depth, depth_at.get((b.function, b.instructions[0][0]), 0))
      costs[d] += b.rel_freq * code
  return out


def worst_case_costs(by_depth, factor: float) -> list:
  """A function's cost (spill_cost_by_depth's list) under every way the static
  frequencies can be wrong by up to `factor` per loop level: each level's trip counts
  scaled by `factor` or 1 / `factor`, and with them every block at that level or deeper.
  The difference of two such costs is linear in each level's scale, so its largest
  value over all scales in [1/factor, factor] is at one of these 2^levels corners: a
  side no costlier than another at every corner is no costlier for any such error."""
  levels = len(by_depth) - 1
  out = []
  for corner in range(2 ** levels):
    scale, cost = 1.0, by_depth[0]
    for d in range(1, levels + 1):
      scale *= factor if corner >> (d - 1) & 1 else 1.0 / factor
      cost += scale * by_depth[d]
    out.append(cost)
  return out
