"""The compiler's own machine basic blocks of an object or executable, with their static
block frequencies.

llc/clang write them on request into the SHT_LLVM_BB_ADDR_MAP section:
`-basic-block-address-map -pgo-analysis-map=bb-freq` (llc; clang: -fbasic-block-address-map
plus -mllvm -pgo-analysis-map=bb-freq). The section does not change the code (.text is
byte-identical; checked on lua's hot files) and survives linking, so the same reader
serves a training compile's object and a profiled program. `llvm-readobj --bb-addr-map`
prints it as JSON; per function: its address, per range its blocks (MBB id, offset,
size) and, with the PGO analysis map, each block's frequency from MachineBlockFrequencyInfo.
`rel_freq` is a block's frequency relative to the function's entry block: the weight
LLVM's own RegAllocScore gives a block's instructions.
"""
import dataclasses
import json
import subprocess

FLAGS_LLC = ("-basic-block-address-map", "-pgo-analysis-map=bb-freq")


class MapError(ValueError):
  """The object has no usable basic-block address map."""


@dataclasses.dataclass
class MapBlock:
  mbb: int          # the MachineBasicBlock number
  start: int        # address (absolute for executables, section offset for objects)
  size: int
  rel_freq: float   # static frequency relative to the entry block (1.0 without a map)


@dataclasses.dataclass
class MapFunction:
  name: str
  start: int
  blocks: list      # MapBlock, in address order
  has_freq: bool


def _merge_maps(pairs):
  # One "BBAddrMap" key per map section (e.g. main in .text.startup, the rest in .text)
  # within the same JSON object: keep them all.
  out = {}
  for k, v in pairs:
    if k == "BBAddrMap" and k in out:
      out[k] = list(out[k]) + list(v)
    else:
      out[k] = v
  return out


def parse(text: str, name: str = "<readobj>") -> list:
  """MapFunctions of `llvm-readobj --bb-addr-map --elf-output-style=JSON` output."""
  try:
    doc = json.loads(text, object_pairs_hook=_merge_maps)
  except json.JSONDecodeError as e:
    raise MapError(f"{name}: llvm-readobj output is not JSON: {e}") from e
  files = doc if isinstance(doc, list) else [doc]
  out = []
  for f in files:
    for entry in f.get("BBAddrMap", []) or []:
      fn = entry.get("Function", {})
      ranges = fn.get("BB Ranges", [])
      pgo = (fn.get("PGO analyses") or {}).get("PGO BB entries") or []
      blocks, i = [], 0
      for r in ranges:
        base = int(r["Base Address"])
        for b in r.get("BB Entries", []):
          blocks.append(MapBlock(int(b["ID"]), base + int(b["Offset"]), int(b["Size"]),
                                 float(pgo[i]["Frequency"]) if i < len(pgo) else 1.0))
          i += 1
      has_freq = bool(pgo) and len(pgo) == len(blocks)
      entry_freq = next((b.rel_freq for b in blocks if b.mbb == 0), 0.0)
      for b in blocks:
        b.rel_freq = b.rel_freq / entry_freq if has_freq and entry_freq > 0 else 1.0
      blocks.sort(key=lambda b: b.start)
      out.append(MapFunction(fn.get("Name", ""), int(fn.get("At", 0)), blocks, has_freq))
  return out


def read(path, readobj: str = "llvm-readobj-22") -> list:
  """MapFunctions of an object or executable; MapError if it has no map."""
  try:
    r = subprocess.run([readobj, "--bb-addr-map", "--elf-output-style=JSON", str(path)],
                       capture_output=True, text=True, timeout=300)
  except FileNotFoundError as e:
    raise MapError(f"{readobj} not found (apt-get install llvm-22)") from e
  if r.returncode != 0:
    raise MapError(f"{path}: {readobj} failed: {r.stderr.strip()[-300:]}")
  funcs = parse(r.stdout, str(path))
  if not funcs:
    raise MapError(f"{path}: no basic-block address map (compile with "
                   f"{' '.join(FLAGS_LLC)})")
  return funcs
