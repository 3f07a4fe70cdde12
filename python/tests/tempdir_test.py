"""Tools keep their temporary files (TensorFlow's autograph files among them) in a
private directory that is gone after the tool exits or, if it was killed, after the
next tool starts."""
import os
import pathlib
import signal
import subprocess
import sys

CHILD = """
import sys, tempfile, time
from mlgo.util.files import private_tempdir
d = private_tempdir()
import tensorflow as tf
@tf.function
def f(x):
  if x > 0:
    return x + 1
  return x - 1
f(tf.constant(1.0))
open(tempfile.mktemp(), "w").write("x")
print(d, flush=True)
if sys.argv[1] == "hang":
  time.sleep(600)
"""


def _run(home, mode, mlgo_home=None, **env_vars):
  script = home / "child.py"   # autograph needs the source in a file
  script.write_text(CHILD)
  env = dict(os.environ, MLGO_HOME=str(mlgo_home or home / "mlgo"),
             PYTHONPATH=os.pathsep.join(sys.path), **env_vars)
  return subprocess.Popen([sys.executable, str(script), mode], env=env,
                          stdout=subprocess.PIPE, text=True)


def test_clean_exit_and_killed_tool_leave_nothing(tmp_path):
  p = _run(tmp_path, "exit")
  d = pathlib.Path(p.stdout.readline().strip())
  assert p.wait() == 0
  assert d.parent == tmp_path / "mlgo" / "tmp" and not d.exists()
  p = _run(tmp_path, "hang")
  d = pathlib.Path(p.stdout.readline().strip())
  assert any(d.glob("__autograph_generated_file*.py"))   # autograph wrote there, not /tmp
  p.send_signal(signal.SIGKILL)
  p.wait()
  assert d.exists()   # a killed process cleans nothing ...
  p = _run(tmp_path, "exit")
  p.stdout.readline()
  assert p.wait() == 0
  assert not d.exists() and not list((tmp_path / "mlgo" / "tmp").iterdir())   # ... the next tool does


def test_read_only_home_gets_a_private_dir_in_the_system_temp_dir(tmp_path):
  # MLGO_HOME cannot hold a tmp dir (as in Bazel's sandbox): before, the tool wrote into
  # the system temp dir itself and a killed TensorFlow run left its files there.
  blocked = tmp_path / "home-is-a-file"
  blocked.write_text("")
  system = tmp_path / "system-tmp"
  system.mkdir()
  p = _run(tmp_path, "hang", mlgo_home=blocked, TMPDIR=str(system))
  d = pathlib.Path(p.stdout.readline().strip())
  assert d.parent == system and d.name.startswith("mlgo-")
  assert any(d.glob("__autograph_generated_file*.py"))
  assert [x.name for x in system.iterdir()] == [d.name]   # nothing beside it
  p.send_signal(signal.SIGKILL)
  p.wait()
  p = _run(tmp_path, "exit", mlgo_home=blocked, TMPDIR=str(system))
  d2 = pathlib.Path(p.stdout.readline().strip())
  assert p.wait() == 0
  assert d2.parent == system and not d2.exists()   # a clean exit removes its own dir


INNER_TEST = """
import os, tempfile
def test_writes_a_temp_file():
  assert tempfile.gettempdir() == os.environ["TMPDIR"]
  open(tempfile.mktemp(), "w").write("x")
  print("TMPDIR=" + os.environ["TMPDIR"])
"""


def test_bazel_test_runner_keeps_temp_files_in_a_dir_it_removes(tmp_path):
  # rules/pytest_main.py, which runs every test file of `bazel test //...`: a killed
  # training subprocess in a test had left TensorFlow's autograph files in /tmp.
  runner = pathlib.Path(__file__).parents[2] / "rules" / "pytest_main.py"  # in runfiles too
  (tmp_path / "inner_test.py").write_text(INNER_TEST)
  env = {k: v for k, v in os.environ.items() if k != "XML_OUTPUT_FILE"}
  out = subprocess.run([sys.executable, str(runner), str(tmp_path / "inner_test.py"), "-s"],
                       env=dict(env, PYTHONPATH=os.pathsep.join(sys.path)),
                       capture_output=True, text=True, check=True).stdout
  d = pathlib.Path(next(l for l in out.splitlines() if "TMPDIR=" in l).split("TMPDIR=")[1])
  assert d.name.startswith("mlgo-test-")
  assert not d.exists()   # the file the test wrote went with the directory


# Runs a genrule tool's file as Bazel does (as __main__) and prints the temp dir it used.
RUN_TOOL = """
import runpy, sys, tempfile
sys.argv = sys.argv[1:]
try:
  runpy.run_path(sys.argv[0], run_name="__main__")
finally:
  print("TMP=" + tempfile.gettempdir(), flush=True)
"""


def test_build_tools_keep_temp_files_in_a_dir_they_remove(tmp_path):
  # rules/aot.bzl's genrule tools run TensorFlow inside Bazel build actions, which share
  # the machine's /tmp: a build of the tiny policies had left autograph's
  # __pycache__/*.pyc there (six files a policy).
  system = tmp_path / "system-tmp"
  system.mkdir()
  env = dict(os.environ, TMPDIR=str(system), PYTHONPATH=os.pathsep.join(sys.path))
  used = []
  for argv in (["cc/aot/tiny_policy.py", "--problem", "regalloc_eviction",
                "--out_dir", str(tmp_path / "tiny")],
               ["cc/aot/aot_compile.py", "--saved_model_files",
                str(tmp_path / "tiny" / "saved_policy" / "saved_model.pb"),
                "--out_dir", str(tmp_path / "aot"), "--problem", "regalloc_eviction"]):
    out = subprocess.run([sys.executable, "-c", RUN_TOOL] + argv, env=env,
                         capture_output=True, text=True, check=True).stdout
    used.append(pathlib.Path(out.split("TMP=")[1].strip()))
  assert (tmp_path / "tiny" / "weights.npz").exists()
  assert (tmp_path / "aot" / "policy.o").exists()
  for d in used:
    assert d.parent == system and d.name.startswith("mlgo-build-")
    assert not d.exists()
  assert not list(system.iterdir())   # nothing left beside them either
