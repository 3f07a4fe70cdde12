"""Debian source packages for a corpus: the package sets, fetching and unpacking them.

Per package: `apt-get source --download-only` into a cache directory (re-runs reuse the
download), then `dpkg-source -x`. Separate from build.py, which compiles what this
unpacks: this half talks to apt and never runs a compiler. BuildError, any failure of a
corpus build, is defined here because fetching is the first thing that can fail.
"""
from __future__ import annotations

import pathlib
import shutil
import subprocess

C_PACKAGES = ("bzip2", "brotli", "cjson", "jansson", "libyaml", "lua5.4", "lz4", "zlib",
              "mbedtls", "libsodium", "pcre2")
CXX_PACKAGES = ("tinyxml2", "libjsoncpp", "fmtlib", "yaml-cpp", "snappy", "leveldb")
DEFAULT_PACKAGES = C_PACKAGES + CXX_PACKAGES
# More packages, disjoint from the default set, that build without a configure step. The
# shipped inlining models never trained on them (models/inlining_oz*/TRAINING.md);
# models/regalloc_eviction_wide did. Made for widening probe data; mostly evaluation.
EXTRA_PACKAGES = ("re2", "double-conversion", "woff2", "tinyxml", "taglib", "expat",
                  "giflib", "lzo2", "libpng1.6", "zopfli")
# Never used in training, probing or selection, by any problem: what a user's own code
# looks like to a shipped policy. Two C++ (pugixml, libebml) and four C packages.
UNSEEN_PACKAGES = ("pugixml", "libebml", "libdeflate", "xxhash", "utf8proc", "cmark")
# A second unseen set (2026-11-27), four of its six packages C++: nothing has trained,
# probed or selected with it. So far it has judged two probe-tuned eviction policies
# against the shipped one, once (docs/regalloc.md, "Rollout probes for eviction").
FRESH_PACKAGES = ("lmdb", "opus", "simdjson", "graphite2", "soundtouch", "hunspell")
# A third unseen set (2026-11-29): every package of a longer list of candidates whose
# source the mirror had and of which the corpus builder compiled at least one unit. Five
# of its twelve packages are C++. First used to judge the context inliner (stop 48).
SEALED_PACKAGES = ("libspng", "json-c", "tinyobjloader", "libtommath", "libtomcrypt",
                   "libwebp", "muparser", "glm", "googletest", "fribidi", "tinycdb",
                   "benchmark")
# Training only (2026-11-29): more varied code for the inliner to learn from, never used to
# judge or select a policy, so every other set keeps its role. The packages of two trial
# builds that the mirror had and that gave modules (nettle and libuv1 left out: ~600 small
# C modules would have outweighed the rest); 9 of the 20 are C++.
WIDE_PACKAGES = ("zstd", "xz-utils", "jq", "libonig", "libconfig", "yajl", "c-ares",
                 "libevent", "flac", "protobuf-c", "lodepng", "exiv2", "zeromq3", "cppunit",
                 "flatbuffers", "qpdf", "libde265", "libopenmpt", "sentencepiece",
                 "libphonenumber")
# Runtime checks only (2026-12-04): packages that no corpus set holds, so no policy,
# probe or selection has seen their code; runtime_check's newest reserve programs are
# built from them. Deliberately not in PACKAGE_SETS: a corpus made of them would spend
# them.
RUNTIME_ONLY_PACKAGES = ("mujs", "lzip", "libsamplerate")
PACKAGE_SETS = {"default": DEFAULT_PACKAGES, "extra": EXTRA_PACKAGES,
                "unseen": UNSEEN_PACKAGES, "fresh": FRESH_PACKAGES,
                "sealed": SEALED_PACKAGES, "wide": WIDE_PACKAGES}


class BuildError(RuntimeError):
  pass


def _run(cmd, cwd=None, timeout=600) -> subprocess.CompletedProcess:
  """Runs a tool, its output captured as text (build.py runs the compiler with it)."""
  return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                        errors="replace")


def expand_packages(spec: str) -> list[str]:
  """'a,b,@extra' -> package names; '@NAME' stands for PACKAGE_SETS[NAME]. Duplicates
  are dropped (first one wins) so a package is never compiled twice."""
  out = []
  for item in (x.strip() for x in spec.split(",")):
    if not item:
      continue
    if item.startswith("@"):
      if item[1:] not in PACKAGE_SETS:
        raise BuildError(f"unknown package set {item!r}; known: "
                         f"{', '.join('@' + k for k in PACKAGE_SETS)}")
      names = PACKAGE_SETS[item[1:]]
    else:
      names = (item,)
    out += [n for n in names if n not in out]
  if not out:
    raise BuildError(f"no packages in {spec!r}")
  return out


def _codename() -> str:
  try:
    for line in pathlib.Path("/etc/os-release").read_text().splitlines():
      if line.startswith("VERSION_CODENAME="):
        return line.split("=", 1)[1].strip().strip('"')
  except OSError:
    pass
  return "bookworm"


def fetch_source(package: str, cache: pathlib.Path) -> pathlib.Path:
  """Downloads (once) and unpacks (once) a Debian source package; returns its root."""
  pdir = cache / package
  pdir.mkdir(parents=True, exist_ok=True)
  src = pdir / "src"
  done = pdir / ".unpacked"
  if done.exists() and src.is_dir():
    return src
  dscs = sorted(pdir.glob("*.dsc"))
  if not dscs or not (pdir / ".downloaded").exists():
    errors = []
    # A security update missing from the mirror makes the newest version unfetchable;
    # the release's own version is the fallback.
    for spec in (package, f"{package}/{_codename()}"):
      r = _run(["apt-get", "source", "--download-only", spec], cwd=pdir)
      if r.returncode == 0:
        break
      errors.append((r.stderr.strip().splitlines() or ["apt-get source failed"])[-1])
    else:
      hint = ""
      if any("no source" in e.lower() or "deb-src" in e.lower() for e in errors):
        hint = " (is a deb-src entry configured? ./setup.sh adds one)"
      raise BuildError(f"{package}: apt-get source failed: {errors[0]}{hint}")
    (pdir / ".downloaded").write_text("ok\n")
    dscs = sorted(pdir.glob("*.dsc"))
  if not dscs:
    raise BuildError(f"{package}: no .dsc after apt-get source in {pdir}")
  # Newest version when several were downloaded (mtime order: last fetched wins).
  dsc = max(dscs, key=lambda p: p.stat().st_mtime)
  if src.exists():
    shutil.rmtree(src)
  r = _run(["dpkg-source", "--no-check", "-x", dsc.name, "src"], cwd=pdir)
  if r.returncode != 0:
    # Files from different versions can mix in the cache: retry from a clean download.
    raise BuildError(f"{package}: dpkg-source -x {dsc.name} failed: "
                     f"{(r.stderr.strip().splitlines() or ['?'])[-1]}")
  done.write_text(dsc.name + "\n")
  return src
