"""Training-log reader throughput: native (C++) vs pure-Python, measured in one run
on the same eviction-shaped stream. Usage: bazel run //tools:bench_log_reader [-- --size-mb=80]"""

import argparse
import os
import sys
import tempfile

from mlgo.log import bench


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__)
  ap.add_argument("--size-mb", type=float, default=80, help="stream size to generate")
  ap.add_argument("--repeat", type=int, default=3, help="native runs (best is reported)")
  args = ap.parse_args(argv)
  with tempfile.TemporaryDirectory(prefix="mlgo-bench-log-") as d:
    path = os.path.join(d, "eviction.log")
    info = bench.make_stream(path, args.size_mb)
    print(f"stream: {info['bytes'] / 1e6:.1f} MB, {info['observations']} observations "
          f"in {info['contexts']} contexts, 21 features ([1,33] int64/float32 + progress)")
    r = bench.run(path, repeat=args.repeat)
  print(f"read_log (whole stream -> stacked numpy per context):")
  print(f"  native  {r['native_read_log_mb_s']:9.1f} MB/s")
  print(f"  python  {r['python_read_log_mb_s']:9.1f} MB/s")
  print(f"  speedup {r['read_log_speedup']:9.1f}x (goal >= 20x)")
  print(f"StreamReader.next_event (one numpy array per feature per observation):")
  print(f"  native  {r['native_stream_mb_s']:9.1f} MB/s  {r['native_stream_obs_s']:10.0f} obs/s")
  print(f"  python  {r['python_stream_mb_s']:9.1f} MB/s  {r['python_stream_obs_s']:10.0f} obs/s")
  print(f"  speedup {r['stream_speedup']:9.1f}x")
  return 0


if __name__ == "__main__":
  sys.exit(main())
