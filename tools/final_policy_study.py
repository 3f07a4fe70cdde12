"""Which final policy should a training run keep? Compares selection rules on finished
runs, using only what each run saved (its validated iteration policies), then evaluates
every candidate on the given suites.

  bazel run //tools:final_policy_study -- --output=DIR RUN_DIR RUN_DIR ... \
      [--problem=regalloc_eviction] [--suites=@extra,heldout,@unseen] [--wide_modules=200]

Candidates per run (RUN_DIR is a train_* output: RUN/ppo/policies/iter-N, log.jsonl):
  best40     the run's own final rule: the best on its own validation modules
  own_ens3   logit ensemble (derived.ensemble_policies) of the 3 best by that validation
  own_avg3   weight average of the same 3
  wide_best  the best on --wide_modules other seeded training modules (module_mean)
  wide_ens3 / wide_avg3  ensemble / average of the 3 best by the wide validation
  best40_cm / wide_best_cm  (eviction) the same policies with the cost mask put on after
             training (regalloc_architectures.eviction_architecture): same weights, the density
             inputs (all zero before, NaN normalization) given a finite normalization
             and zero first-layer weights, so only the mask changes decisions
Everything is cached under --output (a rerun only adds what is missing); the tables go to
DIR/study.md, one per suite: each run's total change, the mean, the worst run and the
mean count of modules more than 1% worse.
"""
import argparse
import json
import pathlib
import sys

from mlgo.util.cli import user_path

CANDIDATES = ("best40", "own_ens3", "own_avg3", "wide_best", "wide_ens3", "wide_avg3",
              "best40_cm", "wide_best_cm")


def _cfg(**kw):
  """Validation settings (PPOConfig's, as a run's own validation reads them)."""
  from mlgo.training import ppo  # pylint: disable=import-outside-toplevel
  return ppo.PPOConfig(**{"seed": 777, "validation_modules": 200, "jobs": 2,
                          "validation_metric": "module_mean", **kw})


class Study:

  def __init__(self, problem_name, out, wide_modules):
    from mlgo import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
    from mlgo import problems as problems_lib  # pylint: disable=import-outside-toplevel
    from mlgo.env import work  # pylint: disable=import-outside-toplevel
    self.problem = problems_lib.get_problem(problem_name)
    self.corpus = work.corpus_for(corpus_lib.corpus_arg(None, self.problem.corpus_opt),
                                  self.problem)
    self.out = out
    self.wide_cfg = _cfg(validation_modules=wide_modules)
    self.state, self.dft = {}, {}
    from mlgo.training import selection  # pylint: disable=import-outside-toplevel
    self.selection = selection
    self.wide_mods = selection.validation_set(self.corpus.split("train"), self.state,
                                              self.wide_cfg)

  def _validate(self, policy_dir, mods, cfg, state, dft):
    from mlgo.policy import policy_io  # pylint: disable=import-outside-toplevel
    pol = policy_io.load_policy(policy_dir)
    return self.selection.validate(self.problem, self.corpus, mods, pol.spec, pol.arch.w,
                                   dft, cfg, state)[0]

  def own_validation(self, run):
    """{iteration: the run's own validation}: the logged ones, and the warm start's
    (validated before the first log row) recomputed on the run's own modules."""
    st = json.loads((run / "ppo/checkpoint/state.json").read_text())
    hist = st.get("validation_history")
    if hist:   # runs since validation_history was kept
      return {int(k): v for k, v in hist.items()}
    rows = [json.loads(l) for l in (run / "ppo/log.jsonl").read_text().splitlines()]
    val = {r["iteration"]: r["validation_change_pct"] for r in rows
           if "validation_change_pct" in r}
    cache = self.out / run.name / "own0.json"
    if not cache.exists():
      by = {m.name: m for m in self.corpus.split("train")}
      v = self._validate(run / "ppo/policies/iter-00000",
                         [by[n] for n in st["validation_set"]],
                         _cfg(validation_metric=st["config"]["validation_metric"]), {}, {})
      cache.parent.mkdir(parents=True, exist_ok=True)
      cache.write_text(json.dumps({"0": v}))
    val[0] = json.loads(cache.read_text())["0"]
    return val

  def wide_validation(self, run, its):
    cache = self.out / run.name / "wide.json"
    done = json.loads(cache.read_text()) if cache.exists() else {}
    for it in sorted(its):
      if str(it) not in done:
        done[str(it)] = self._validate(run / "ppo/policies" / f"iter-{it:05d}",
                                       self.wide_mods, self.wide_cfg, self.state, self.dft)
        print(f"{run.name} iteration {it}: wide validation {done[str(it)]:+.3f}%",
              flush=True)
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(done, indent=1))
    return {int(k): v for k, v in done.items()}

  def candidates(self, run):
    from mlgo.policy import derived  # pylint: disable=import-outside-toplevel
    own = self.own_validation(run)
    wide = self.wide_validation(run, own)
    it_dir = lambda it: run / "ppo/policies" / f"iter-{it:05d}"
    out = self.out / run.name
    best = self.selection.best_iterations
    c = {"best40": it_dir(best(own, 1)[0])}
    for name, val in (("own", own), ("wide", wide)):
      top = best(val, 3)
      if name == "wide":
        c["wide_best"] = it_dir(top[0])
      for kind, merge in (("ens3", derived.ensemble_policies),
                          ("avg3", derived.average_policies)):
        d = out / f"{name}_{kind}"
        if not (d / "policy.json").exists():
          merge([it_dir(i) for i in top], d, saved_model=False)
        c[f"{name}_{kind}"] = d
    if self.problem.name == "regalloc_eviction":
      for name in ("best40", "wide_best"):
        d = out / f"{name}_cm"
        if not (d / "policy.json").exists():
          with_cost_mask_after_training(c[name], d)
        c[f"{name}_cm"] = d
    (out / "candidates.json").write_text(json.dumps(
        {k: str(v) for k, v in c.items()} | {"own": own, "wide": wide}, indent=1))
    return c


def with_cost_mask_after_training(src, dst):
  """(Eviction) `src` with the cost mask on and otherwise the same decisions (above)."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  from mlgo.policy import normalization, regalloc_architectures  # pylint: disable=import-outside-toplevel
  from mlgo.policy import policy_io  # pylint: disable=import-outside-toplevel
  p = policy_io.load_policy(src)
  spec = json.loads(json.dumps(p.spec))
  names = [f["name"] for f in spec["features"]]
  di = [n for n in names if n != "progress"].index("use_def_density")
  for d in spec["normalization"]:
    if d["name"] == "use_def_density":
      if np.isfinite(d["mean"]):
        raise ValueError(f"{src}: use_def_density has a finite normalization (trained with "
                         "the feature); train with the cost mask instead")
      d.update(boundaries=[0.0], levels=[1.0], mean=0.0, std=1.0)
  norms = {d["name"]: normalization.FeatureNorm.from_json(d) for d in spec["normalization"]}
  masked = regalloc_architectures.eviction_architecture(
      names, norms, spec["architecture"]["hidden"], cost_mask=True)
  spec["architecture"] = dict(spec["architecture"], cost_mask=masked["cost_mask"])
  w = dict(p.arch.w)
  k = w["hidden_0/kernel"].copy()
  k[di * regalloc_architectures.E:(di + 1) * regalloc_architectures.E, :] = 0.0
  w["hidden_0/kernel"] = k
  policy_io.write_policy_dir(dst, spec, w, saved_model=False)


def tables(out, runs, suites) -> str:
  lines = []
  for suite in suites:
    name = suite.lstrip("@")
    lines += [f"## {name}", "",
              "| candidate | " + " | ".join(r.name for r in runs)
              + " | mean | worst run | mean modules >1% worse |",
              "|---|" + "---:|" * (len(runs) + 3)]
    for c in CANDIDATES:
      vals, worse = [], []
      for r in runs:
        f = out / r.name / c / "generalization.json"
        row = None
        if f.exists():
          row = {x["suite"]: x for x in json.loads(f.read_text())["suites"]}.get(name)
        vals.append(row["change_pct"] if row else None)
        if row:
          worse.append(row["modules_regressed"])
      have = [v for v in vals if v is not None]
      cells = " | ".join(f"{v:+.2f}%" if v is not None else "" for v in vals)
      tail = (f"{sum(have) / len(have):+.2f}% | {max(have):+.2f}% | "
              f"{sum(worse) / len(worse):.1f}") if have else " | | "
      lines.append(f"| {c} | {cells} | {tail} |")
    lines.append("")
  return "\n".join(lines)


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--problem", default="regalloc_eviction")
  ap.add_argument("--output", required=True)
  ap.add_argument("--suites", default="@extra,heldout,@unseen")
  ap.add_argument("--wide_modules", type=int, default=200)
  ap.add_argument("runs", nargs="+")
  a = ap.parse_args(argv)
  runs = [user_path(r) for r in a.runs]
  bad = [str(r) for r in runs if not (r / "ppo" / "log.jsonl").exists()]
  if bad:
    raise SystemExit(f"not train_* output dirs (no ppo/log.jsonl): {', '.join(bad)}")
  out = user_path(a.output)
  out.mkdir(parents=True, exist_ok=True)
  suites = [s for s in a.suites.split(",") if s]
  from mlgo.evaluation import generalization  # pylint: disable=import-outside-toplevel
  study = Study(a.problem, out, a.wide_modules)
  for run in runs:
    for name, d in study.candidates(run).items():
      if not (out / run.name / name / "generalization.json").exists():
        generalization.run(a.problem, d, out / run.name / name, suites, stream=sys.stdout)
  (out / "study.md").write_text(tables(out, runs, suites))
  print((out / "study.md").read_text())
  return 0


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()
  sys.exit(main())
