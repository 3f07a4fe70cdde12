"""Distillation: a policy's decisions learned by another network (e.g. a smaller one on the
cheap "slog" encoding, for a compiler that evaluates the model at every decision).

Round 0 records the teacher's own compiles of the corpus' training split; each later round
records the previous student's own compiles, so the next student also learns the teacher's
answer in the states its own mistakes lead to (DAgger). Every student is trained on all
traces so far, labelled by the teacher (bc.train_bc(teacher=...)). Traces append and
finished students are kept, so an interrupted run resumes where it stopped.
"""
import json
import math
import pathlib
import sys
import time

from mlgo.policy import policy_io
from mlgo.training import bc, dataset, trace


def distill(teacher, corpus_dir, output, work_dir=None, encoding: str = "slog",
            hidden=(32, 32), rounds: int = 2, epochs: int = 30, batch_size: int = 512,
            jobs: int = 2, seed: int = 0, timeout: float = 300.0,
            stream=sys.stderr) -> dict:
  """Writes the last round's student to `output` (a policy dir) and returns a summary:
  per round, the trace's decisions and the student's agreement with the teacher."""
  if rounds < 1:
    raise ValueError(f"rounds must be at least 1, not {rounds}")
  teacher = pathlib.Path(teacher)
  problem = policy_io.load_policy(teacher).problem
  output = pathlib.Path(output)
  work = pathlib.Path(work_dir) if work_dir else output.with_name(output.name + ".distill")
  work.mkdir(parents=True, exist_ok=True)
  t0 = time.monotonic()
  traces, summary = [], {"teacher": str(teacher), "problem": problem, "encoding": encoding,
                         "hidden": list(hidden), "rounds": []}
  current = teacher
  for r in range(rounds):
    t = work / f"trace-{r}"
    stats = trace.generate_default_trace(corpus_dir, problem, t, jobs=jobs, seed=seed,
                                         timeout=timeout, policy_dir=current, stream=stream)
    if stats["failed"]:
      print(f"distill: round {r}: {stats['failed']} modules failed to compile (skipped)",
            file=stream)
    traces.append(t)
    student = output if r == rounds - 1 else work / f"student-{r}"
    done = student / "bc_metrics.json"
    if r < rounds - 1 and done.exists():
      m = json.loads(done.read_text())       # resumed: this round's student is there
    else:
      m = bc.train_bc(traces, student, hidden=list(hidden), epochs=epochs,
                      batch_size=batch_size, seed=seed, label_smoothing=0.0,
                      teacher=teacher, encoding=encoding, stream=stream)
    summary["rounds"].append({"round": r, "trace_decisions": dataset.Dataset(t).num_decisions,
                              "train_agreement": _finite(m["train_accuracy"]),
                              "heldout_agreement": _finite(m["heldout_accuracy"])})
    print(f"distill: round {r + 1}/{rounds}: agreement with the teacher "
          f"{m['train_accuracy']:.4f} on training decisions, {m['heldout_accuracy']:.4f} on "
          "held-out ones", file=stream, flush=True)
    current = student
  summary["seconds"] = time.monotonic() - t0
  (output / "distill.json").write_text(json.dumps(summary, indent=1))
  return summary


def _finite(x):
  """None for a figure with no decisions behind it (NaN is not JSON)."""
  return None if x is None or (isinstance(x, float) and math.isnan(x)) else x
