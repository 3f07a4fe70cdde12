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


def private_tempdir() -> pathlib.Path:
  """Points this process's (and its children's) temporary files at a private directory
  under MLGO_HOME/tmp, removed at exit; directories of processes that were killed are
  removed by the next tool that starts. TensorFlow's autograph writes a
  `__autograph_generated_file*.py` per traced function and deletes them only at a clean
  exit: the tools must not litter the shared /tmp."""
  import multiprocessing.util  # pylint: disable=import-outside-toplevel
  import shutil  # pylint: disable=import-outside-toplevel
  import tempfile  # pylint: disable=import-outside-toplevel
  from mlgo.util.cli import mlgo_home  # pylint: disable=import-outside-toplevel
  root = mlgo_home() / "tmp"
  try:
    root.mkdir(parents=True, exist_ok=True)
    for d in root.glob("pid-*"):
      pid = int(d.name.split("-")[1])
      try:
        os.kill(pid, 0)
      except ProcessLookupError:
        shutil.rmtree(d, ignore_errors=True)
      except PermissionError:
        pass
    mine = pathlib.Path(tempfile.mkdtemp(prefix=f"pid-{os.getpid()}-", dir=root))
  except (OSError, ValueError):
    return pathlib.Path(tempfile.gettempdir())   # a read-only MLGO_HOME: keep the default
  os.environ["TMPDIR"] = str(mine)
  tempfile.tempdir = str(mine)
  # Removed after multiprocessing's own exit cleanup (its forkserver dir lives in here),
  # not before it: a plain atexit hook would run first and make that cleanup fail.
  multiprocessing.util.Finalize(None, shutil.rmtree, args=(str(mine), True),
                                exitpriority=-200)
  return mine
