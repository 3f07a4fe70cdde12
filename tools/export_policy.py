"""Exports a trained policy dir as release artifacts (SavedModel, TFLite, XLA AOT, and
OUT/inline_advisor.so or OUT/advisor_server). See mlgo.export.export.

  bazel run //tools:export_policy -- --policy=models/inlining_oz --output=/tmp/out
  clang-22 -Oz -fpass-plugin=/tmp/out/inline_advisor.so -c x.c
An inlining_ir2vec policy also writes OUT/ir2vec_vocab.json; clang-22 then needs
  -mllvm -ml-inliner-ir2vec-vocab-file=OUT/ir2vec_vocab.json -mllvm -ir2vec-vocab-path=OUT/ir2vec_vocab.json
"""
import argparse
import sys

from mlgo.export import export
from mlgo.export.aot import ExportError
from mlgo.util.cli import user_path


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--policy", required=True,
                  help="policy dir (saved_policy/ + policy.json) or a SavedModel dir")
  ap.add_argument("--output", required=True, help="output dir (created)")
  ap.add_argument("--no_tflite", action="store_true", help="skip the TFLite conversion")
  ap.add_argument("--no_native", action="store_true",
                  help="only SavedModel/TFLite/AOT files, no plugin or server build")
  ap.add_argument("--llvm_versions", default="22,19",
                  help="LLVM versions to build the inline plugin for (first one is "
                       "inline_advisor.so); missing dev files are skipped")
  args = ap.parse_args(argv)
  try:
    res = export.export_policy(
        user_path(args.policy), user_path(args.output), tflite=not args.no_tflite,
        build_native=not args.no_native,
        llvm_versions=tuple(int(v) for v in args.llvm_versions.split(",") if v))
  except (ExportError, FileNotFoundError) as e:
    print(f"export_policy: error: {e}", file=sys.stderr)
    return 1
  for k, v in sorted(res.files.items()):
    print(f"  {k:16s} {v}")
  for k, v in sorted(res.checks.items()):
    if k != "tflite_input_tensors":
      print(f"  check {k}: {v}")
  if "plugin_llvm22" in res.files:
    flags = res.checks.get("clang_flags", "")  # inlining_ir2vec: the vocabulary options
    print(f"use: clang-22 -Oz -fpass-plugin={res.files['plugin_llvm22']} {flags} -c x.c"
          .replace("  ", " "))
  return 0


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()  # nothing the tool or TensorFlow writes is left in /tmp
  sys.exit(main())
