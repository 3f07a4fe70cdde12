"""File helpers shared by training, datasets and caches."""
import json
import os
import pathlib
import shutil


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


def replace_dir_with_copy(src, dst) -> None:
  """Makes `dst` a copy of the directory `src`; a run killed mid-copy leaves `dst` whole
  (old or new) and a DST.tmp that the next call removes: copy beside, then rename."""
  dst = pathlib.Path(dst)
  tmp = dst.with_name(dst.name + ".tmp")
  shutil.rmtree(tmp, ignore_errors=True)
  shutil.copytree(src, tmp)
  shutil.rmtree(dst, ignore_errors=True)
  os.rename(tmp, dst)


def private_tempdir(root=None, prefix: str = "mlgo-") -> pathlib.Path:
  """Points this process's (and its children's) temporary files at a private directory,
  removed at exit. TensorFlow's autograph writes a `__autograph_generated_file*.py` per
  traced function and deletes them only at a clean exit: the tools must not litter the
  shared /tmp.
  - By default the directory is under MLGO_HOME/tmp, named by pid, and the directories of
    processes that were killed are removed by the next tool that starts.
  - With `root` given, or when MLGO_HOME is read-only (a Bazel test sandbox), it is a
    `prefix*` directory in `root` or the system temp dir. Killed processes' directories
    are not looked for there: a pid seen from one PID namespace (a sandbox's) need not be
    the process that made the directory."""
  import tempfile  # pylint: disable=import-outside-toplevel
  from mlgo.util.cli import mlgo_home  # pylint: disable=import-outside-toplevel
  if root is None:
    home_tmp = mlgo_home() / "tmp"
    try:
      home_tmp.mkdir(parents=True, exist_ok=True)
      _remove_dirs_of_dead_processes(home_tmp)
      return _use_tempdir(tempfile.mkdtemp(prefix=f"pid-{os.getpid()}-", dir=home_tmp))
    except (OSError, ValueError):
      pass   # a read-only MLGO_HOME
  return _use_tempdir(tempfile.mkdtemp(prefix=prefix, dir=root))


def _remove_dirs_of_dead_processes(home_tmp: pathlib.Path) -> None:
  import shutil  # pylint: disable=import-outside-toplevel
  for d in home_tmp.glob("pid-*"):
    try:
      os.kill(int(d.name.split("-")[1]), 0)
    except ProcessLookupError:
      shutil.rmtree(d, ignore_errors=True)
    except (PermissionError, ValueError):
      pass


def _use_tempdir(path: str) -> pathlib.Path:
  import multiprocessing.util  # pylint: disable=import-outside-toplevel
  import shutil  # pylint: disable=import-outside-toplevel
  import tempfile  # pylint: disable=import-outside-toplevel
  os.environ["TMPDIR"] = path
  tempfile.tempdir = path
  # Removed after multiprocessing's own exit cleanup (its forkserver dir lives in here),
  # not before it: a plain atexit hook would run first and make that cleanup fail.
  multiprocessing.util.Finalize(None, shutil.rmtree, args=(path, True), exitpriority=-200)
  return pathlib.Path(path)
