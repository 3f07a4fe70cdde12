"""File helpers shared by training, datasets and caches."""
import json
import os
import pathlib


def write_json_atomic(path, obj, indent=None) -> None:
  """Writes JSON so a reader (or a run killed mid-write) sees the old or the new file,
  never a partial one: temp file, fsync, rename."""
  path = pathlib.Path(path)
  tmp = path.with_name(path.name + ".tmp")
  with open(tmp, "w") as f:
    json.dump(obj, f, indent=indent)
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)
