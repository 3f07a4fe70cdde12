"""valgrind --tool=callgrind output with --dump-instr=yes: self cost per instruction.

The format (valgrind's callgrind format, version 1): header lines (`events:` names the
cost columns), then `ob=`/`fl=`/`fn=` context lines (names compressed as `(N) name` the
first time, `(N)` after) and cost lines `ADDR LINE COST...`. With `positions: instr
line`, ADDR is absolute (0x...), relative to the previous line (+N / -N) or the same (*);
trailing zero costs are left out. A `calls=` line announces that the next cost line is
the inclusive cost of a call made there: it is not the calling instruction's own cost
and is skipped here (the callee's instructions carry their own).
"""
import dataclasses
import re

import numpy as np


class ProfileError(ValueError):
  """A profile that cannot be read; the message names the file and the line."""


@dataclasses.dataclass
class Profile:
  events: list                    # cost column names, e.g. Ir Dr Dw I1mr ... Bim
  costs: dict                     # (object file, address) -> np.ndarray[len(events)]
  functions: dict                 # (object file, address) -> function name
  command: str = ""

  def column(self, event: str) -> int:
    try:
      return self.events.index(event)
    except ValueError:
      raise ProfileError(f"profile has no {event!r} event (has {self.events})") from None

  def total(self, event: str) -> float:
    i = self.column(event)
    return float(sum(c[i] for c in self.costs.values()))


_SHARED = {"ob": "ob", "cob": "ob", "fn": "fn", "cfn": "fn"}
_NAMED = re.compile(r"^\((\d+)\)(?:\s+(.*))?$")


def _position(tok: str, prev: int, where: str) -> int:
  try:
    if tok == "*":
      return prev
    if tok[0] in "+-":
      return prev + int(tok, 0)
    return int(tok, 0)
  except (ValueError, IndexError):
    raise ProfileError(f"{where}: bad position {tok!r}") from None


def parse(path) -> Profile:
  try:
    with open(path, errors="replace") as f:
      lines = f.read().splitlines()
  except OSError as e:
    raise ProfileError(f"{path}: cannot read the profile: {e}") from e
  return parse_lines(lines, str(path))


def parse_lines(lines, name: str = "<profile>") -> Profile:
  events, positions, cmd = None, ["line"], ""
  names = {"ob": {}, "fn": {}}
  ob = fn = ""
  costs, functions = {}, {}
  addr = 0
  skip_next = False
  for no, line in enumerate(lines, 1):
    where = f"{name}:{no}"
    if not line or line.startswith("#"):
      continue
    if line.startswith("events:"):
      events = line.split(":", 1)[1].split()
      continue
    if line.startswith("positions:"):
      positions = line.split(":", 1)[1].split()
      continue
    if line.startswith("cmd:"):
      cmd = line.split(":", 1)[1].strip()
      continue
    head = line.split("=", 1)[0]
    if "=" in line and head.isalpha() or head in ("cfi", "cfl", "cob", "cfn", "jump",
                                                      "jcnd", "calls", "jfi", "jfn"):
      value = line.split("=", 1)[1]
      group = _SHARED.get(head)
      if group:   # ob/cob and fn/cfn share one name table
        m = _NAMED.match(value.strip())
        if m:
          if m.group(2) is not None:
            names[group][m.group(1)] = m.group(2)
          elif m.group(1) not in names[group]:
            raise ProfileError(f"{where}: {head}=({m.group(1)}) used before it was named")
          value = names[group][m.group(1)]
        if head == "ob":
          ob = value
        elif head == "fn":
          fn = value
      elif head == "calls":
        skip_next = True
      continue
    if ":" in line.split()[0]:
      continue   # other header lines (version:, creator:, desc:, summary:, totals: ...)
    if events is None:
      raise ProfileError(f"{where}: cost line before the 'events:' header")
    toks = line.split()
    if positions[0] != "instr":
      raise ProfileError(f"{name}: positions {positions}: record with --dump-instr=yes")
    if len(toks) < len(positions):
      raise ProfileError(f"{where}: cost line too short: {line!r}")
    addr = _position(toks[0], addr, where)
    vals = toks[len(positions):]
    if len(vals) > len(events):
      raise ProfileError(f"{where}: {len(vals)} costs for {len(events)} events")
    if skip_next:
      skip_next = False
      continue
    try:
      v = np.array([int(x) for x in vals] + [0] * (len(events) - len(vals)), np.int64)
    except ValueError:
      raise ProfileError(f"{where}: non-integer cost in {line!r}") from None
    key = (ob, addr)
    if key in costs:
      costs[key] += v
    else:
      costs[key] = v
      functions[key] = fn
  if events is None:
    raise ProfileError(f"{name}: not a callgrind profile (no 'events:' line)")
  if not costs:
    raise ProfileError(f"{name}: the profile holds no costs (did the program run?)")
  return Profile(events, costs, functions, cmd)
