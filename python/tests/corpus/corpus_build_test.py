"""make_corpus on a pre-unpacked local package (no downloads), default_corpus caching,
config-header stand-ins, include-dir guessing, and the baseline report."""
import csv
import json
import pathlib
import shutil
import subprocess

import pytest

from mlgo import corpus as corpus_lib
from mlgo.corpus import baseline
from mlgo.corpus import build
from mlgo.corpus import source_tree
from mlgo.corpus import sources
from mlgo.training import testing
from mlgo.util import toolchain as toolchain_lib

TC = toolchain_lib.toolchain(22)


def _cache_with_tinypkg(tmp_path) -> pathlib.Path:
  """A source cache where tinypkg is already downloaded and unpacked (as fetch_source
  leaves it), so make_corpus runs without apt."""
  cache = tmp_path / "sources"
  shutil.copytree(testing.data_path("testdata/corpus/tinypkg"), cache / "tinypkg")
  (cache / "tinypkg" / ".unpacked").write_text("tinypkg.dsc\n")
  return cache


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("built")
  cache = _cache_with_tinypkg(tmp)
  stats = build.make_corpus(tmp / "corpus", ["tinypkg"], opt="Oz", jobs=2, llvm_version=22,
                            cache=cache)
  return tmp / "corpus", stats


def test_make_corpus_counts_and_lists_skipped(built):
  path, stats = built
  assert stats["modules"] == 2 and stats["skipped"] == 2 and stats["c++_modules"] == 1
  assert stats["packages"]["tinypkg"] == {"units": 4, "modules": 2, "skipped": 2, "c": 1,
                                          "c++": 1}
  rows = [l.split("\t") for l in (path / "skipped.txt").read_text().splitlines()
          if not l.startswith("#")]
  assert sorted(r[1] for r in rows) == ["broken.c", "empty.c"]
  reasons = {r[1]: r[2] for r in rows}
  assert "generated_by_configure.h" in reasons["broken.c"] and "error" in reasons["broken.c"]
  assert "no function definitions" in reasons["empty.c"]
  c = corpus_lib.load_corpus(path)
  assert [(m.name, m.language, m.package) for m in c.modules] == [
      ("tinypkg/checksum.c", "c", "tinypkg"), ("tinypkg/table.cc", "c++", "tinypkg")]
  assert c.llvm_version == 22 and c.opt_level == "Oz" and not c.problems
  desc = json.loads((path / "corpus_description.json").read_text())
  assert desc["mlgo"]["build"]["packages"]["tinypkg"]["skipped"] == 2
  assert not (path / ".tmp").exists() and not (path / ".gen").exists()


def test_make_corpus_O2_and_missing_package(tmp_path):
  cache = _cache_with_tinypkg(tmp_path)
  # An unknown package whose cache entry is broken: counted as unavailable, not fatal.
  (cache / "brokenpkg").mkdir()
  (cache / "brokenpkg" / ".downloaded").write_text("ok\n")
  stats = build.make_corpus(tmp_path / "c", ["tinypkg", "brokenpkg"], opt="O2", jobs=1,
                            llvm_version=22, cache=cache)
  assert stats["modules"] == 2 and "brokenpkg" in stats["failed_packages"]
  c = corpus_lib.load_corpus(tmp_path / "c")
  assert c.opt_level == "O2"
  assert all("-O2" in m.cc1_flags for m in c.modules)
  assert "brokenpkg\t*\tpackage unavailable" in (tmp_path / "c" / "skipped.txt").read_text()
  with pytest.raises(build.BuildError):
    build.make_corpus(tmp_path / "d", ["tinypkg"], opt="O7", cache=cache)


def test_default_corpus_built_once_and_partial_redone(tmp_path, monkeypatch):
  cache_home = tmp_path / "home"
  shutil.copytree(_cache_with_tinypkg(tmp_path), cache_home / "sources")
  monkeypatch.setenv("MLGO_HOME", str(cache_home))
  monkeypatch.setitem(build.PACKAGE_SETS, "default", ("tinypkg",))
  monkeypatch.setitem(build.PACKAGE_SETS, "unseen", ("tinypkg",))
  d = corpus_lib.default_corpus(22)
  assert d == cache_home / "corpora" / "default-llvm22-Oz"
  assert (d / build.COMPLETE_MARKER).exists()
  assert len(corpus_lib.load_corpus(d).modules) == 2
  # Reused: a file added to the finished corpus survives a second call.
  (d / "sentinel").write_text("x")
  assert corpus_lib.default_corpus(22) == d and (d / "sentinel").exists()
  # A corpus that make_corpus finished there for the same packages (no marker: e.g.
  # tools/make_corpus --output=<that dir>) is kept too.
  (d / build.COMPLETE_MARKER).unlink()
  assert corpus_lib.default_corpus(22) == d and (d / "sentinel").exists()
  # A partial build (a killed make_corpus leaves its marker) is redone from scratch.
  (d / build.PARTIAL_MARKER).write_text("")
  assert corpus_lib.default_corpus(22) == d
  assert not (d / "sentinel").exists() and (d / build.COMPLETE_MARKER).exists()
  # So is one built for another package list.
  (d / build.COMPLETE_MARKER).unlink()
  (d / "sentinel").write_text("x")
  monkeypatch.setitem(build.PACKAGE_SETS, "default", ("tinypkg", "otherpkg"))
  corpus_lib.default_corpus(22)
  assert not (d / "sentinel").exists() and (d / build.COMPLETE_MARKER).exists()
  monkeypatch.setitem(build.PACKAGE_SETS, "default", ("tinypkg",))
  # The O2 variant lives next to it.
  d2 = corpus_lib.default_corpus(22, opt="O2")
  assert d2.name == "default-llvm22-O2" and corpus_lib.load_corpus(d2).opt_level == "O2"
  # Other package sets: their own cached corpus, also what --corpus=@SET names.
  d3 = corpus_lib.corpus_arg("@unseen", "O2")
  assert d3.name == "unseen-llvm22-O2" and (d3 / build.COMPLETE_MARKER).exists()
  with pytest.raises(build.BuildError, match="unknown package set"):
    corpus_lib.corpus_arg("@nosuchset")


def test_generated_config_headers(tmp_path):
  root = tmp_path / "pkg"
  (root / "include" / "lib").mkdir(parents=True)
  (root / "include" / "lib" / "version.h.in").write_text(
      '#define LIB_VERSION "@VERSION@"\n#define LIB_MAJOR @LIB_MAJOR@\n@LIB_EXTRA_DEF@\n'
      "#define LIB_INLINE @lib_inline@\n#define int32_t @LIB_INT32@\n")
  (root / "port_config.h.in").write_text(
      "#cmakedefine01 HAVE_FDATASYNC\n#cmakedefine HAVE_FOO 1\n#define N ${N_VALUE}\n")
  (root / "present.h.in").write_text("#define X @X@\n")
  (root / "present.h").write_text("#define X 1\n")
  gen = tmp_path / "gen"
  source_tree.generate_config_dir(root, gen)
  v = (gen / "include" / "lib" / "version.h").read_text()
  assert '#define LIB_VERSION "0"' in v and "#define LIB_MAJOR 0" in v
  assert "#define LIB_INLINE inline" in v and "/* #define int32_t" in v
  assert "\n#define int32_t" not in v
  p = (gen / "port_config.h").read_text()
  assert "#define HAVE_FDATASYNC 0" in p and "#undef HAVE_FOO" in p and "#define N 0" in p
  assert not (gen / "present.h").exists()
  assert (gen / "config.h").exists()
  # A unit including "lib/version.h" compiles with the guessed include dirs.
  (root / "src").mkdir()
  (root / "src" / "v.c").write_text('#include "lib/version.h"\n#include "config.h"\n'
                                    "int major(void) { return LIB_MAJOR; }\n")
  flags = source_tree.include_dirs(root) + source_tree.include_dirs(gen)
  r = subprocess.run([TC.clang, "-fsyntax-only", *flags, str(root / "src" / "v.c")],
                     capture_output=True, text=True)
  assert r.returncode == 0, r.stderr


def test_include_dirs_order_and_system_header_shadowing(tmp_path):
  root = tmp_path / "pkg"
  for d in ("include/pkg", "src", "tests/override", "debian", "win32"):
    (root / d).mkdir(parents=True)
  (root / "include" / "pkg" / "api.h").write_text("")
  (root / "src" / "internal.h").write_text("")
  (root / "tests" / "override" / "time.h").write_text("#error shadowed\n")
  (root / "debian" / "x.h").write_text("")
  (root / "win32" / "config.h").write_text("")
  flags = source_tree.include_dirs(root)
  assert flags[0] == f"-I{root}"
  assert flags.index(f"-I{root / 'include'}") < flags.index(f"-I{root / 'src'}")
  assert f"-I{root / 'include' / 'pkg'}" in flags
  assert f"-iquote{root / 'tests' / 'override'}" in flags
  assert not any("debian" in f or "win32" in f for f in flags)
  # <time.h> still resolves to the system header.
  (root / "src" / "t.c").write_text("#include <time.h>\nint f(void){return (int)time(0);}\n")
  r = subprocess.run([TC.clang, "-fsyntax-only", *flags, str(root / "src" / "t.c")],
                     capture_output=True, text=True)
  assert r.returncode == 0, r.stderr


def test_find_units_skips_packaging_and_ports(tmp_path):
  root = tmp_path / "pkg"
  for d in ("src", "debian", ".pc/patch", "win32", "tests"):
    (root / d).mkdir(parents=True)
    (root / d / "a.c").write_text("int a;\n")
  (root / "src" / "b.cpp").write_text("int b;\n")
  (root / "src" / "c.h").write_text("")
  units = source_tree.find_units("pkg", root)
  assert [(u.rel, u.language) for u in units] == [
      ("src/a.c", "c"), ("src/b.cpp", "c++"), ("tests/a.c", "c")]
  assert units[0].name == "pkg/src/a.c"


# ---------------------------------------------------------------------------------------
# Baseline report


def test_baseline_report(built, tmp_path):
  src_path, _ = built
  path = tmp_path / "corpus"
  shutil.copytree(src_path, path)
  # One good extra module and one corrupt one: the report covers all the others.
  desc = json.loads((path / "corpus_description.json").read_text())
  shutil.copy(path / "tinypkg/checksum.c.bc", path / "tinypkg/bad.c.bc")
  shutil.copy(path / "tinypkg/checksum.c.cmd", path / "tinypkg/bad.c.cmd")
  (path / "tinypkg/bad.c.bc").write_bytes(b"BC\xc0\xde" + b"\0" * 3)
  desc["modules"].append("tinypkg/bad.c")
  (path / "corpus_description.json").write_text(json.dumps(desc))

  rep = baseline.run_baseline(path, jobs=2)
  assert [r.module for r in rep.results] == ["tinypkg/bad.c", "tinypkg/checksum.c",
                                             "tinypkg/table.cc"]
  bad = rep.results[0]
  assert not bad.ok and str(path / "tinypkg/bad.c.bc") in bad.reason
  assert "\n" not in bad.reason
  # Sizes equal plain clang -Oz -c of the same bitcode's modules.
  c = corpus_lib.load_corpus(path)
  expect = {}
  for m in c.modules:
    o = tmp_path / "x.o"
    subprocess.run(m.compile_argv(TC.clang, str(o)), check=True)
    expect[m.name] = toolchain_lib.text_size(str(o))
  assert rep.sizes() == expect and all(v > 0 for v in expect.values())
  assert rep.total_text == sum(expect.values())
  by_lang = rep.totals_by("language")
  assert by_lang["c"]["text_size"] == expect["tinypkg/checksum.c"]
  assert by_lang["c++"]["text_size"] == expect["tinypkg/table.cc"]

  csv_path = rep.write(tmp_path / "report")
  rows = list(csv.DictReader(open(csv_path)))
  assert [r["status"] for r in rows] == ["failed", "ok", "ok"]
  assert baseline.read_csv(csv_path) == expect
  summary = json.loads((tmp_path / "report" / "summary.json").read_text())
  assert summary["total_text_size"] == rep.total_text and summary["modules_failed"] == 1
  text = rep.format()
  assert f"total .text: {rep.total_text:,} bytes over 2 modules (1 failed)" in text


def test_baseline_compile_failure_is_a_result(built, tmp_path):
  path, _ = built
  c = corpus_lib.load_corpus(path)
  m = c.modules[0]
  m.cc1_flags = m.cc1_flags + ["-this-flag-does-not-exist"]
  r = baseline.compile_module(m, TC.clang, str(tmp_path), 0)
  assert not r.ok and r.reason.startswith("clang exited with 1")
  assert "-this-flag-does-not-exist" in r.reason


def test_baseline_report_tool(built, tmp_path, capsys):
  try:
    mod = testing.tool_module("baseline_report")
  except FileNotFoundError:
    pytest.skip("tools/baseline_report.py not in runfiles")
  path, _ = built
  assert mod.main(["--corpus", str(path), "--output", str(tmp_path / "r"), "--jobs", "1"]) == 0
  out = capsys.readouterr().out
  assert "total .text:" in out and (tmp_path / "r" / "baseline.csv").exists()
  (tmp_path / "broken").mkdir()
  (tmp_path / "broken" / "corpus_description.json").write_text("{oops")
  assert mod.main(["--corpus", str(tmp_path / "broken")]) == 1
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and "corpus_description.json: malformed JSON" in err[0]


def test_make_corpus_refuses_to_replace_other_directories(tmp_path):
  cache = _cache_with_tinypkg(tmp_path)
  precious = tmp_path / "precious"
  precious.mkdir()
  (precious / "notes.txt").write_text("keep me")
  with pytest.raises(build.BuildError) as e:
    build.make_corpus(precious, ["tinypkg"], cache=cache, jobs=1)
  assert "refusing to replace" in str(e.value) and str(precious) in str(e.value)
  assert (precious / "notes.txt").read_text() == "keep me"
  # An earlier corpus, or an interrupted build, is replaced.
  out = tmp_path / "out"
  build.make_corpus(out, ["tinypkg"], cache=cache, jobs=1)
  assert not (out / build.PARTIAL_MARKER).exists()
  build.make_corpus(out, ["tinypkg"], cache=cache, jobs=1)
  (out / "corpus_description.json").unlink()
  (out / build.PARTIAL_MARKER).write_text("")
  assert build.make_corpus(out, ["tinypkg"], cache=cache, jobs=1)["modules"] == 2


def test_expand_packages_sets_order_and_errors():
  got = sources.expand_packages("zlib, @extra,re2,,zlib")
  # zlib first, then the extra set in its order, no package twice
  assert got[0] == "zlib"
  assert got[1:] == list(sources.EXTRA_PACKAGES)
  assert len(got) == len(set(got)) == 1 + len(sources.EXTRA_PACKAGES)
  assert sources.expand_packages("@default") == list(sources.DEFAULT_PACKAGES)
  # the extra set is disjoint from the default one (it widens training data), and no
  # package is in two sets: an unseen set shares nothing with training or another suite
  assert not set(sources.EXTRA_PACKAGES) & set(sources.DEFAULT_PACKAGES)
  every = [p for names in sources.PACKAGE_SETS.values() for p in names]
  assert len(every) == len(set(every))
  assert sources.expand_packages("@sealed") == list(sources.SEALED_PACKAGES)
  with pytest.raises(sources.BuildError, match="unknown package set '@nosuch'"):
    sources.expand_packages("zlib,@nosuch")
  with pytest.raises(sources.BuildError, match="no packages"):
    sources.expand_packages(" , ")
