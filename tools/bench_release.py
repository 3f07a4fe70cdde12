"""Release-mode overhead on the default corpus: clang-22 + inline advisor plugin vs plain
-Oz, llc-22 + advisor server vs plain llc, plugin size (see mlgo.export.bench).

  bazel run //tools:bench_release -- --modules=20 --reps=3
  bazel run //tools:bench_release -- --export_dir=/tmp/inl --server_export_dir=/tmp/ev

Without export dirs the tiny test policies' plugin and server built by Bazel are used.
"""
import argparse
import json
import os
import pathlib
import sys

from mlgo.export import bench
from mlgo.util.cli import user_path


def _runfile(rel):
  for base in (os.environ.get("RUNFILES_DIR"), pathlib.Path(__file__).parent.parent, "."):
    if base:
      for p in (pathlib.Path(base) / rel, pathlib.Path(base) / "mlgo" / rel):
        if p.exists():
          return str(p.resolve())
  return None


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--modules", type=int, default=20)
  ap.add_argument("--reps", type=int, default=3)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--export_dir", help="export of an inlining policy (inline_advisor.so)")
  ap.add_argument("--server_export_dir", help="export of an eviction policy (advisor_server)")
  ap.add_argument("--skip_plugin", action="store_true")
  ap.add_argument("--skip_server", action="store_true")
  ap.add_argument("--output", help="write the numbers as JSON here")
  args = ap.parse_args(argv)

  plugin = (str(user_path(args.export_dir) / "inline_advisor.so") if args.export_dir
            else _runfile("cc/inline_plugin/plugin_tiny.so"))
  server = (str(user_path(args.server_export_dir) / "advisor_server")
            if args.server_export_dir else _runfile("cc/advisor_server/server_tiny_eviction"))
  model_obj = (user_path(args.export_dir) / "aot" / "policy.o" if args.export_dir
               else _runfile("cc/aot/model_tiny_inlining/policy.o"))
  for what, path in (("plugin", plugin), ("server", server)):
    if not path or not os.path.exists(path):
      print(f"bench_release: {what} not found ({path})", file=sys.stderr)
      return 1
  p = s = None
  if not args.skip_plugin:
    p = bench.bench_plugin(plugin, args.modules, args.reps, args.seed)
  if not args.skip_server:
    s = bench.bench_server(server, "regalloc_eviction", args.modules, args.reps, args.seed)
  model_bytes = os.path.getsize(model_obj) if model_obj and os.path.exists(model_obj) else None
  print(bench.format_report(p, s, model_bytes))
  if args.output:
    pathlib.Path(user_path(args.output)).write_text(
        json.dumps({"plugin": p, "server": s, "model_object_bytes": model_bytes,
                    "plugin_path": plugin, "server_path": server}, indent=1) + "\n")
  return 0


if __name__ == "__main__":
  sys.exit(main())
