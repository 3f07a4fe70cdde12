"""llvm-mca's static cost of machine basic blocks: a baseline for a learned block cost model.

`block_throughput` returns, per block (mlgo.profiles.blocks.Block), llvm-mca's Total Cycles
divided by its Iterations: the cycles one execution of the block costs when the block runs
over and over as a loop body, in a steady state. This is used rather than "Block
RThroughput", which only counts the pressure on the execution ports and so ignores
dependency chains (4 dependent imuls and 4 independent ones get the same RThroughput); the
simulated cycles include latencies, loop-carried dependencies, dispatch width and port
pressure. With `iterations` = 100 the pipeline fill and drain add about latency/100.

Limits, those of llvm-mca: every load hits L1 and loads and stores never alias, branches
are always predicted right, a call is a single instruction (the callee's work is not
counted; llvm-mca gives its result a latency of 100 cycles), and the block is assumed to
be its own loop, which a block run once in straight-line code is not.

All blocks go to llvm-mca as one assembly file (or one per `chunk` blocks) with one
`# LLVM-MCA-BEGIN b<i>` / `# LLVM-MCA-END` region per block. objdump's branch and call
targets (`0x1234 <foo+0x40>`) become an undefined symbol `mca_target` and its `# ...`
comments are dropped. llvm-mca runs with --skip-unsupported-instructions=any, so a line it
cannot parse, or an instruction without a scheduling model for `mcpu`, is dropped from its
region instead of failing the file; a block whose region lost an instruction (or vanished)
gets None, never a cost of the instructions left. If llvm-mca still fails on a chunk, the
chunk is split in halves until the failing block is alone (and gets None). An empty block
costs 0.0.
"""
import functools
import json
import re
import shutil
import subprocess
import tempfile

_TARGET = re.compile(r"(^|\s)(?:0x)?[0-9a-f]+ <.*>")
_COMMENT = re.compile(r"\s*#.*$")


def _line(mnemonic: str, operands: str) -> str:
  """One objdump instruction as assemblable AT&T text."""
  text = f"{mnemonic} {operands}"
  return _COMMENT.sub("", _TARGET.sub(r"\1mca_target", text)).strip()


def block_throughput(blocks, *, mcpu: str = "x86-64", llvm_mca: str = "llvm-mca-22",
                     iterations: int = 100, timeout: float = 600,
                     chunk: int = 2000) -> list:
  """Per block: llvm-mca's cycles per execution of the block in a steady-state loop
  (Total Cycles / Iterations), 0.0 for an empty block, None if llvm-mca could not model
  one of its instructions. `timeout` (seconds) is per llvm-mca run."""
  tool = shutil.which(llvm_mca)
  if not tool:
    raise RuntimeError(f"{llvm_mca} not found; install LLVM's llvm-mca "
                       f"(e.g. `apt-get install llvm-22`)")
  out = [0.0 if not b.instructions else None for b in blocks]
  todo = [i for i, b in enumerate(blocks) if b.instructions]
  texts = {i: [_line(m, o) for _, _, m, o in blocks[i].instructions] for i in todo}
  run = functools.partial(_run, tool, mcpu, iterations, timeout, texts)
  for k in range(0, len(todo), chunk):
    for i, v in _bisect(run, todo[k:k + chunk]).items():
      out[i] = v
  return out


class _McaFailed(Exception):
  """llvm-mca exited with an error or printed no report."""


def _bisect(run, ids) -> dict:
  """run(ids), or, if llvm-mca fails on them, the union of runs on each half (a lone
  failing block is left out: None)."""
  try:
    return run(ids)
  except _McaFailed:
    if len(ids) == 1:
      return {}
    mid = len(ids) // 2
    return {**_bisect(run, ids[:mid]), **_bisect(run, ids[mid:])}


def _run(tool, mcpu, iterations, timeout, texts, ids) -> dict:
  """{block index: cycles per iteration} for the blocks whose region llvm-mca modeled in
  full."""
  src = []
  for i in ids:
    src += [f"# LLVM-MCA-BEGIN b{i}", *texts[i], "# LLVM-MCA-END"]
  with tempfile.NamedTemporaryFile("w", suffix=".s") as f:
    f.write("\n".join(src) + "\n")
    f.flush()
    cmd = [tool, "-mtriple=x86_64-unknown-unknown", f"-mcpu={mcpu}",
           f"-iterations={iterations}", "--skip-unsupported-instructions=any", "--json",
           "--instruction-info=0", "--resource-pressure=0", f.name]
    try:
      r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
      raise RuntimeError(f"{tool} took over {timeout}s on {len(ids)} blocks") from e
  if r.returncode != 0:
    raise _McaFailed(r.stderr[-500:])
  try:
    regions = json.loads(r.stdout)["CodeRegions"]
  except (ValueError, KeyError) as e:
    raise _McaFailed(f"unreadable {tool} output: {r.stdout[:200]!r}") from e
  got = {}
  for reg in regions:
    i = int(reg["Name"][1:])
    s = reg["SummaryView"]
    if len(reg["Instructions"]) == len(texts[i]) and s["Iterations"]:
      got[i] = s["TotalCycles"] / s["Iterations"]
  return got
