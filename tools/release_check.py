"""Checks that an inlining policy's release plugin gives the .text its evaluation measured.

  bazel run //tools:evaluate -- --problem=inlining --policy=models/X --output=/tmp/ev
  bazel run //tools:release_check -- --policy=models/X --evaluation=/tmp/ev [--every=4]
  bazel run //tools:release_check -- --export=/tmp/out --evaluation=/tmp/ev

With --policy the policy is exported first (into OUTPUT/export, as tools/export_policy
does); with --export an existing export_policy output is used. Every --every-th module of
the evaluation is compiled by plain clang-22 -cc1 with the plugin, and its .text compared
with the evaluation's policy column. Writes OUTPUT/release_check.csv (one row a module)
and release_check.json; the last line is the summary. Exit status 1 if any module differs
or fails to compile.
"""
import argparse
import sys

from mlgo.util.cli import policy_path, user_path


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  src = ap.add_mutually_exclusive_group(required=True)
  src.add_argument("--policy", help="policy dir to export and check")
  src.add_argument("--export", help="an export_policy output dir (export.json, plugin)")
  ap.add_argument("--evaluation", required=True,
                  help="an evaluate output dir (per_key.csv, summary.json)")
  ap.add_argument("--corpus", help="corpus dir (default: the one summary.json names)")
  ap.add_argument("--every", type=int, default=1, help="check every N-th module")
  ap.add_argument("--jobs", type=int, default=2)
  ap.add_argument("--output", default="release_check", help="output dir")
  a = ap.parse_args(argv)
  from mlgo.export import release_check  # pylint: disable=import-outside-toplevel
  from mlgo.export.aot import ExportError  # pylint: disable=import-outside-toplevel
  out = user_path(a.output)
  try:
    if a.policy:
      from mlgo.export import export  # pylint: disable=import-outside-toplevel
      exp = out / "export"
      export.export_policy(policy_path(a.policy), exp, tflite=False, llvm_versions=(22,),
                           llvm_embed=False)
    else:
      exp = user_path(a.export)
    res = release_check.check_release(
        exp, user_path(a.evaluation), corpus=user_path(a.corpus) if a.corpus else None,
        every=a.every, jobs=a.jobs)
  except (release_check.ReleaseCheckError, ExportError, FileNotFoundError) as e:
    print(f"release_check: error: {e}", file=sys.stderr)
    return 1
  res.write(out)
  for r in res.rows:
    if r.status != "same":
      print(f"  {r.status:9s} {r.module}: evaluation {r.evaluation}, plugin {r.plugin} "
            f"{r.reason}".rstrip())
  print(f"wrote {out}/release_check.csv")
  print(res.summary())
  return 0 if res.ok else 1


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()
  sys.exit(main())
