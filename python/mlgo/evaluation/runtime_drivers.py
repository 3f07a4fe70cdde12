"""Project-written driver programs and config headers for runtime_check's programs.

A library package has no program of its own that runs a useful workload, so a small
driver of ours calls it on a generated document and prints what it computed (counts and
checksums, never addresses, so every build and memory layout prints the same). Where a
package's own program is used (brotli, minigzip, cmark, zopfli, xmlwf, pcre2grep), only
the headers a configure step would have written are ours. The texts are real C/C++ files
in drivers/ (readable, compilable, diffable); runtime_check writes them into a program's
generated-file directory. Nothing there is third-party code.
"""
import pathlib
import re

DRIVERS = pathlib.Path(__file__).parent / "drivers"  # in Bazel runfiles: python/BUILD data
_LOCAL_INCLUDE = re.compile(r'^#include "(mlgo_[a-z_]+\.h)"', re.M)


def gen_files(*specs) -> dict:
  """{name in the generated dir: text} for drivers/ files. A spec is a file name, or
  (name to write, file in drivers/) when the program expects a generic name (config.h).
  Our shared headers (mlgo_*.h) a file includes come along."""
  out = {}
  for spec in specs:
    name, src = spec if isinstance(spec, tuple) else (spec, spec)
    path = DRIVERS / src
    if not path.is_file():
      raise FileNotFoundError(f"{path}: no such runtime_check driver file")
    out[name] = path.read_text()
    for header in _LOCAL_INCLUDE.findall(out[name]):
      out.setdefault(header, (DRIVERS / header).read_text())
  return out
