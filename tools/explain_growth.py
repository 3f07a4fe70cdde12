"""Why did a module get bigger? The call sites where an inlining policy answered otherwise
than clang, by caller and callee, with the bytes each costs.

  bazel run //tools:explain_growth -- --policy=P --module=M.bc [--cmd=M.cmd] [--output=DIR]
  bazel run //tools:explain_growth -- --policy=P --evaluation=EVAL_DIR [--corpus=DIR] \
      [--top=5] [--output=DIR]

With --evaluation (an `evaluate` output dir of the same policy), the --top modules of its
regressed_modules.csv (largest growth first) are explained, from --corpus (default: the
default corpus; @SET for a package set). Each departure from clang is reverted alone, the
policy deciding the rest, so a module costs one compile per departure (at most
--max_reverts). Writes growth.md (per module: the call sites that cost the most) and
growth.csv (every departure with the features clang's cost model uses) under --output.
"""
import argparse
import csv
import pathlib
import sys

from mlgo import workers
from mlgo.util.cli import policy_path, user_path


def _explain(module, ref, problem, llvm_version, timeout, max_reverts):
  from mlgo.env import work  # pylint: disable=import-outside-toplevel
  from mlgo.evaluation import growth  # pylint: disable=import-outside-toplevel
  return growth.explain_module(module, work.make_policy(ref), problem,
                               llvm_version=llvm_version, timeout=timeout,
                               max_reverts=max_reverts)


def _modules(a):
  """(modules, llvm version) named by the arguments."""
  from mlgo import corpus as corpus_lib, env  # pylint: disable=import-outside-toplevel
  if a.module:
    m = user_path(a.module)
    if not m.exists():
      raise SystemExit(f"explain_growth: {m}: no such module")
    if m.suffix in (".c", ".cc", ".cpp", ".cxx"):
      import tempfile  # pylint: disable=import-outside-toplevel
      # In the tool's private temp dir (main), removed at exit.
      return [env.module_from_source(str(m), tempfile.mkdtemp(prefix="growth-src-"),
                                     opt="Oz")], 22
    cmd = user_path(a.cmd) if a.cmd else m.with_suffix(".cmd")
    if not cmd.exists():
      raise SystemExit(f"explain_growth: {cmd}: no .cmd beside the module (pass --cmd)")
    try:
      return [env.module_from_files(str(m), str(cmd))], 22
    except (FileNotFoundError, ValueError) as e:
      raise SystemExit(f"explain_growth: {e}") from None
  ev = user_path(a.evaluation)
  listed = ev / "regressed_modules.csv"
  if not listed.exists():
    raise SystemExit(f"explain_growth: {listed}: missing (is {ev} an evaluate output dir?)")
  names = [r["module"] for r in csv.DictReader(open(listed))][:a.top]
  corpus = corpus_lib.load_corpus(corpus_lib.corpus_arg(a.corpus, "Oz"))
  by_name = {m.name: m for m in corpus.modules}
  missing = [n for n in names if n not in by_name]
  if missing:
    raise SystemExit(f"explain_growth: {listed} names modules not in {corpus.path}: "
                     f"{', '.join(missing[:3])} (pass the corpus it was evaluated on)")
  return [by_name[n] for n in names], corpus.llvm_version


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--policy", required=True, help="an inlining policy dir")
  src = ap.add_mutually_exclusive_group(required=True)
  src.add_argument("--module", help="a .bc (with its .cmd beside it, or --cmd) or a .c/.cc")
  src.add_argument("--evaluation", help="an evaluate output dir of this policy")
  ap.add_argument("--cmd")
  ap.add_argument("--corpus", help="with --evaluation: the corpus it ran on")
  ap.add_argument("--top", type=int, default=5)
  ap.add_argument("--max_reverts", type=int, default=200)
  ap.add_argument("--output", default="growth")
  ap.add_argument("--jobs", type=int, default=2)
  ap.add_argument("--timeout", type=float, default=300.0)
  workers.add_flags(ap)
  a = ap.parse_args(argv)
  workers.apply_flags(a)
  from mlgo.env import work  # pylint: disable=import-outside-toplevel
  from mlgo.evaluation import growth  # pylint: disable=import-outside-toplevel
  from mlgo.policy import policy_io  # pylint: disable=import-outside-toplevel
  pdir = policy_path(a.policy)
  problem = policy_io.load_policy(pdir).problem
  ref = work.policy_ref(str(pdir))
  modules, version = _modules(a)
  out = user_path(a.output)
  out.mkdir(parents=True, exist_ok=True)
  reports, failed = {}, []
  with workers.make_pool(None, a.jobs) as pool:
    for m in modules:
      pool.submit(_explain, m, ref, problem, version, a.timeout, a.max_reverts)
    for r in pool.results():
      name = r.item[0].name
      if r.ok:
        reports[name] = r.value
        rep = r.value
        print(f"explain_growth: {name}: {rep['default']:.0f} -> {rep['policy']:.0f} bytes, "
              f"{len(rep['departures'])} departures from clang", file=sys.stderr, flush=True)
      else:
        failed.append(name)
        print(f"explain_growth: {name}: {(r.error or 'failed').strip().splitlines()[-1]}",
              file=sys.stderr, flush=True)
  ordered = [reports[m.name] for m in modules if m.name in reports]
  md = [f"# Where {pdir} answers otherwise than clang", ""] + [growth.markdown(r) for r in ordered]
  if failed:
    md.append(f"Not explained (compile failed): {', '.join(failed)}\n")
  (out / "growth.md").write_text("\n".join(md))
  rows = [row for r in ordered for row in growth.csv_rows(r)]
  with open(out / "growth.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["module"])
    w.writeheader()
    w.writerows(rows)
  print("\n".join(md))
  print(f"wrote {out / 'growth.md'} and {out / 'growth.csv'}")
  return 1 if failed and not ordered else 0


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()
  sys.exit(main())
