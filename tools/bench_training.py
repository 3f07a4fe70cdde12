"""Benchmark of training: per-iteration split and the cost of the policy in the loop.

  bazel run //tools:bench_training -- [--corpus=DIR] [--modules=16] [--iterations=2]
Prints (1) plain compile seconds of N training modules (clang alone, no channel),
the same modules with the default heuristic answering through the interactive channel
and with the numpy policy sampling, and the overhead of each over plain; (2) for a few
PPO iterations, collection / training / export seconds.
"""
import argparse
import subprocess
import sys
import tempfile
import time

from mlgo.util.cli import user_path
from mlgo import workers


def plain_compile(module, llvm_version, timeout):
  from mlgo.util import toolchain  # pylint: disable=import-outside-toplevel
  with tempfile.TemporaryDirectory() as d:
    argv = module.compile_argv(toolchain.toolchain(llvm_version).clang, f"{d}/out.o")
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, timeout=timeout, check=False)
    return p.returncode == 0, time.monotonic() - t0


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--corpus")
  ap.add_argument("--problem", default="inlining")
  ap.add_argument("--modules", type=int, default=16)
  ap.add_argument("--iterations", type=int, default=2)
  ap.add_argument("--jobs", type=int, default=2)
  ap.add_argument("--output", help="dir for the benchmark's training run (default: temp)")
  ap.add_argument("--trace", help="default trace (else a small one is made)")
  ap.add_argument("--warmstart", help="policy dir to sample from (else random init)")
  workers.add_flags(ap)
  a = ap.parse_args(argv)
  workers.apply_flags(a)
  import numpy as np  # pylint: disable=import-outside-toplevel
  from mlgo import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
  from mlgo.env import work as collect  # pylint: disable=import-outside-toplevel
  from mlgo.training import ppo  # pylint: disable=import-outside-toplevel
  from mlgo.workers import make_pool  # pylint: disable=import-outside-toplevel
  corpus_dir = corpus_lib.corpus_arg(a.corpus)
  corpus = corpus_lib.load_corpus(corpus_dir)
  mods = corpus.split("train")
  if a.trace:
    # Modules of typical size: the benchmark should not hinge on one 60k-decision module.
    from mlgo.training import dataset  # pylint: disable=import-outside-toplevel
    info = dataset.Dataset(user_path(a.trace)).modules
    mods = [m for m in mods if 0 < info.get(m.name, {}).get("decisions", 0) <= 4000]
  rng = np.random.default_rng(0)
  mods = [mods[i] for i in rng.choice(len(mods), min(a.modules, len(mods)), replace=False)]
  out = user_path(a.output) if a.output else pathlib_tmp()
  cfg = ppo.PPOConfig(modules_per_iteration=len(mods), jobs=a.jobs,
                      trace_modules=len(mods) * 4, num_epochs=4)
  trainer = ppo.Trainer(corpus_dir, out, problem_name=a.problem, config=cfg,
                        trace=user_path(a.trace) if a.trace else None,
                        warmstart=user_path(a.warmstart) if a.warmstart else None)
  weights = trainer.current_weights()
  sampler = (trainer.spec, weights, False)

  def timed(fn, items):
    t0 = time.monotonic()
    cpu = 0.0
    ok = 0
    with make_pool(None, a.jobs) as pool:
      for r in pool.map_unordered(fn, items):
        cpu += r.seconds
        ok += int(r.ok and (r.value[0] if isinstance(r.value[0], bool) else r.value[0].ok))
    return ok, cpu, time.monotonic() - t0

  rows = []
  if a.problem == "inlining":
    rows.append(("plain clang",) + timed(plain_compile, [(m, corpus.llvm_version, 300)
                                                         for m in mods]))
  rows.append(("default in loop",) + timed(collect.compile_one, [
      (m, a.problem, "default", None, corpus.llvm_version, 300.0) for m in mods]))
  rows.append(("policy in loop",) + timed(collect.compile_one, [
      (m, a.problem, sampler, 1, corpus.llvm_version, 300.0) for m in mods]))
  base = rows[0][2]
  print(f"\ncompile of {len(mods)} modules, {a.jobs} jobs")
  print(f"{'mode':<18} {'ok':>4} {'cpu s':>8} {'wall s':>8} {'overhead':>9}")
  for name, ok, cpu, wall in rows:
    print(f"{name:<18} {ok:>4} {cpu:>8.2f} {wall:>8.2f} {(cpu / base - 1) * 100:>+8.1f}%")
  print(f"\nPPO iterations ({len(mods)} modules each)")
  print(f"{'iter':>4} {'collect s':>10} {'train s':>8} {'export s':>9} {'decisions':>10}")
  for _ in range(a.iterations):
    rec = trainer.iteration()
    print(f"{rec['iteration']:>4} {rec['collect_seconds']:>10.2f} {rec['train_seconds']:>8.2f} "
          f"{rec['export_seconds']:>9.2f} {rec['decisions']:>10}")
  return 0


def pathlib_tmp():
  import pathlib  # pylint: disable=import-outside-toplevel
  return pathlib.Path(tempfile.mkdtemp(prefix="mlgo-bench-"))


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()  # nothing the tool or TensorFlow writes is left in /tmp
  sys.exit(main())
