"""The tracer plugin: byte-identical objects, labels that line up with the channel."""
import subprocess

import numpy as np

from mlgo.regalloc import llc_run, plugin
from mlgo.util.toolchain import toolchain

FLAGS = ["-O2", "-relocation-model=pic"]


def _plain(bc, out):
  subprocess.run([toolchain(22).llc] + FLAGS + ["-filetype=obj", bc, "-o", str(out)],
                 check=True)
  return out.read_bytes()


def test_plugin_loaded_default_mode_is_byte_identical(opt_bc, tmp_path):
  so = plugin.plugin_path()
  for name, bc in opt_bc.items():
    plain = _plain(bc, tmp_path / f"{name}.plain.o")
    log = tmp_path / f"{name}.evict.log"
    subprocess.run([toolchain(22).llc, f"-load={so}", f"-regalloc-evict-trace-log={log}",
                    f"-regalloc-priority-trace-log={tmp_path / 'p.log'}"] + FLAGS +
                   ["-filetype=obj", bc, "-o", str(tmp_path / f"{name}.traced.o")], check=True)
    assert (tmp_path / f"{name}.traced.o").read_bytes() == plain, name
    assert log.read_bytes().startswith(b'{"features":[{"name":"default_index"')


def test_trace_mode_is_byte_identical_and_labels_line_up(opt_bc, tmp_path):
  for problem in llc_run.PROBLEMS:
    for name, bc in opt_bc.items():
      plain = _plain(bc, tmp_path / f"{name}.plain.o")
      obj = tmp_path / f"{name}.{problem}.o"
      res = llc_run.run_llc(bc, FLAGS, problem, None, trace=True, keep_obj=str(obj),
                            timeout=120)
      assert res.ok, res.reason
      assert obj.read_bytes() == plain, (problem, name)
      assert res.decisions > 0
      assert sum(len(t.actions) for t in res.trajectories) == res.decisions
      for t in res.trajectories:
        assert len(t.default_actions) == len(t.actions)
        if problem == llc_run.EVICTION:
          mask = t.features["mask"].reshape(len(t.actions), -1)
          assert mask.shape[1] == 33
          d = t.default_actions.astype(int)
          valid = (d >= 0) & (d < 33)
          # Nearly all default choices are columns the channel marks valid.
          assert valid.mean() > 0.9
          assert np.all(mask[np.flatnonzero(valid), d[valid]] == 1)
        else:
          assert np.all(t.default_actions > 0)
          assert set(t.features) == {"li_size", "stage", "weight"}
      assert set(res.functions) >= {t.name for t in res.trajectories}
      assert all(c >= 0 for c in res.functions.values())
