"""Live processes read from /proc: the one parser of /proc/PID/stat that the compiler
loop (process groups), the Ray test cluster (process trees) and the tests use."""
import os


def live_stat(pid) -> list[bytes] | None:
  """The /proc stat fields of `pid` after its command name (0 = state, 1 = parent pid,
  2 = process group), or None if it is gone or a zombie."""
  try:
    with open(f"/proc/{pid}/stat", "rb") as f:
      stat = f.read()
  except OSError:
    return None
  fields = stat[stat.rfind(b")") + 2:].split()
  return fields if fields and fields[0] not in (b"Z", b"X") else None


def alive(pids) -> list[int]:
  """Those of `pids` that are live (non-zombie) processes."""
  return [int(p) for p in pids if live_stat(p) is not None]


def _live_entries():
  for entry in os.listdir("/proc"):
    if entry.isdigit():
      fields = live_stat(entry)
      if fields is not None and len(fields) > 2:
        yield int(entry), fields


def live_processes(field: int, value: int) -> list[int]:
  """Live (non-zombie) processes whose /proc stat field `field` (counted after the
  command name: 1 = parent pid, 2 = process group) equals `value`."""
  return [pid for pid, fields in _live_entries() if int(fields[field]) == value]


def with_descendants(pids) -> list[int]:
  """`pids` and every live process below them in the process tree."""
  kids = {}
  for pid, fields in _live_entries():
    kids.setdefault(int(fields[1]), []).append(pid)
  out, todo = [], [int(p) for p in pids]
  while todo:
    p = todo.pop()
    if p not in out:
      out.append(p)
      todo += kids.get(p, [])
  return out
