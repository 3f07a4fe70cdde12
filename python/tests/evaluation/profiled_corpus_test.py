"""perf_model corpus: a real program (utf8proc, from its Debian source) built with
instrumentation, run, and compiled with its measured profile into a prepared llc corpus
that the performance-model reward and the trainer take."""
import subprocess

from mlgo import env
from mlgo.env import prepared
from mlgo.evaluation import profiled_corpus
from mlgo.profiles import bbmap
from mlgo.training import testing


def test_profiled_corpus_of_a_real_program(tmp_path, monkeypatch):
  c = profiled_corpus.build(tmp_path / "pgo", role="heldout", programs=["utf8proc"], jobs=2)
  assert c.modules and not c.failures
  again = prepared.load_prepared(tmp_path / "pgo")   # the format every tool reads
  assert [m.name for m in again.modules] == [m.name for m in c.modules]
  m = next(m for m in c.modules if m.name.endswith("utf8proc.c"))
  assert m.package == "utf8proc" and m.split == "train" and m.baseline is not None
  # The bitcode carries the measured branch weights and entry counts.
  ir = subprocess.run(["llvm-dis-22", m.bc_path, "-o", "-"], check=True,
                      capture_output=True, text=True).stdout
  assert "branch_weights" in ir and "function_entry_count" in ir
  # llc's block frequencies follow the profile: the driver's loop runs far more often
  # than its function is entered, and blocks the run never reached are near 0.
  freqs = []
  for mod in c.modules:
    obj = tmp_path / "u.o"
    res = env.compile_module(mod, "regalloc_eviction", env.CompilerDefault(),
                             extra_flags=list(bbmap.FLAGS_LLC), output_path=str(obj))
    assert res.ok, res.reason
    freqs += [b.rel_freq for f in bbmap.read(obj) for b in f.blocks]
  assert max(freqs) > 100 and min(freqs) < 1e-3
  # A second call reuses what is built.
  assert len(profiled_corpus.build(tmp_path / "pgo", role="heldout",
                                   programs=["utf8proc"]).modules) == len(c.modules)
  # The performance-model reward scores its modules.
  monkeypatch.setenv("MLGO_PERF_MODEL", testing.data_path("models/perf_model/cost_model.json"))
  perf = env.compile_module(m, "regalloc_eviction_perf", env.CompilerDefault())
  assert perf.ok and perf.reward["total"] > 0
