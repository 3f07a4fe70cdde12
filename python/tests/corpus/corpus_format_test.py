"""Corpus format: round trip, mlgo-utils import, split, compile_argv, error messages."""
import filecmp
import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig

import pytest

from mlgo import corpus as corpus_lib
from mlgo.corpus import bitcode
from mlgo.corpus import build
from mlgo.corpus import source_tree
from mlgo.corpus import format as fmt
from mlgo.corpus import writer as corpus_writer
from mlgo.util import toolchain as toolchain_lib

TC = toolchain_lib.toolchain(22)
TINY = pathlib.Path(__file__).resolve().parents[3] / "testdata" / "corpus" / "tinypkg"


def _tinypkg_root():
  # Under bazel the runfiles tree holds testdata next to python/.
  for base in [pathlib.Path(os.environ.get("TEST_SRCDIR", "/nonexistent")) / "__main__",
               pathlib.Path(__file__).resolve().parents[3]]:
    p = base / "testdata" / "corpus" / "tinypkg"
    if p.is_dir():
      return p
  raise FileNotFoundError("testdata/corpus/tinypkg not found")


@pytest.fixture(scope="module")
def units(tmp_path_factory):
  """The tiny package compiled the way make_corpus does: {rel: UnitResult}."""
  work = tmp_path_factory.mktemp("units")
  root = work / "tinypkg"
  shutil.copytree(_tinypkg_root() / "src", root)
  incs = source_tree.include_dirs(root)
  out = {}
  for u in source_tree.find_units("tinypkg", root):
    out[u.rel] = build.compile_unit(u, TC, "Oz", incs, work / "gen", str(work / (u.rel + ".bc")))
  return root, out


def _write(tmp_path, units_, names=("checksum.c", "table.cc")):
  root, res = units_
  w = corpus_writer.CorpusWriter(tmp_path / "corpus", llvm_version=22, opt_level="Oz",
                       clang_version=toolchain_lib.clang_version_string(22))
  for rel in names:
    r = res[rel]
    assert r.ok, r.error
    w.add(r.unit.name, r.bc, r.cc1, package="tinypkg", language=r.unit.language,
          source=rel)
  return w.finish()


# ---------------------------------------------------------------------------------------


def test_compile_units_and_skips(units):
  _, res = units
  assert res["checksum.c"].ok and res["table.cc"].ok
  assert res["table.cc"].unit.language == "c++" and res["checksum.c"].unit.language == "c"
  assert not res["broken.c"].ok
  assert "generated_by_configure.h" in res["broken.c"].error
  assert not res["empty.c"].ok and "no function definitions" in res["empty.c"].error
  cc1 = res["checksum.c"].cc1
  assert cc1[0] == "-cc1" and "-Oz" in cc1 and "-emit-obj" in cc1
  assert "-disable-llvm-passes" not in cc1 and "-o" not in cc1
  assert not any(f.endswith("checksum.c") and not f.startswith("-") and
                 cc1[i - 1] != "-main-file-name" for i, f in enumerate(cc1))


def test_round_trip(tmp_path, units):
  path = _write(tmp_path, units)
  desc = json.loads((path / "corpus_description.json").read_text())
  assert desc["modules"] == ["tinypkg/checksum.c", "tinypkg/table.cc"]
  assert desc["has_thinlto"] is False
  assert desc["mlgo"]["llvm_version"] == 22 and desc["mlgo"]["opt_level"] == "Oz"
  raw = (path / "tinypkg" / "checksum.c.cmd").read_bytes()
  assert raw.startswith(b"-cc1\0") and b"\0-Oz\0" in raw and b"\n" not in raw

  c = corpus_lib.load_corpus(path)
  assert c.llvm_version == 22 and c.opt_level == "Oz" and not c.problems
  assert c.clang_version.startswith(("Debian clang version 22", "clang version 22"))
  by = c.by_name()
  m = by["tinypkg/table.cc"]
  assert (m.package, m.language, m.source) == ("tinypkg", "c++", "table.cc")
  assert m.split == corpus_lib.split_for("tinypkg/table.cc")
  assert m.bc_path == str(path / "tinypkg" / "table.cc.bc")
  assert m.cc1_flags == units[1]["table.cc"].cc1
  assert c.provenance["modules"] == "metadata"

  # Write the loaded corpus elsewhere and read it back: identical content.
  copy = corpus_lib.write_corpus(tmp_path / "copy", c.modules, llvm_version=c.llvm_version,
                                 opt_level=c.opt_level, clang_version=c.clang_version)
  c2 = corpus_lib.load_corpus(copy)
  for a, b in zip(c.modules, c2.modules):
    assert (a.name, a.package, a.language, a.split, a.cc1_flags, a.source) == \
        (b.name, b.package, b.language, b.split, b.cc1_flags, b.source)
    assert filecmp.cmp(a.bc_path, b.bc_path, shallow=False)


@pytest.mark.parametrize("rel,driver_flags", [
    ("checksum.c", []),
    ("table.cc", ["-std=c++17"]),
])
def test_compile_argv_reproduces_clang_Oz_c(tmp_path, units, rel, driver_flags):
  root, res = units
  c = corpus_lib.load_corpus(_write(tmp_path, units))
  m = c.by_name()[f"tinypkg/{rel}"]
  out = tmp_path / "from_bc.o"
  argv = m.compile_argv(TC.clang, str(out))
  assert argv[0] == TC.clang and argv[1] == "-cc1"
  assert argv[-6:] == ["-x", "ir", m.bc_path, "-o", str(out), "-emit-obj"]
  subprocess.run(argv, check=True)
  ref = tmp_path / "ref.o"
  driver = TC.clangxx if rel.endswith(".cc") else TC.clang
  # Same flags make_corpus gave the driver, then a plain -Oz -c compile.
  flags = source_tree.driver_flags(res[rel].unit, TC, "Oz", source_tree.include_dirs(root),
                                   tmp_path / "gen")
  subprocess.run([driver] + flags + ["-c", rel, "-o", str(ref)], cwd=root, check=True)
  assert toolchain_lib.text_size(str(out)) == toolchain_lib.text_size(str(ref)) > 0
  assert filecmp.cmp(out, ref, shallow=False), "object bytes differ from clang -Oz -c"


def test_compile_argv_extra_flags_and_action(tmp_path, units):
  c = corpus_lib.load_corpus(_write(tmp_path, units))
  m = c.by_name()["tinypkg/checksum.c"]
  argv = m.compile_argv("clang", "o.s", ["-mllvm", "-foo"], action="-S")
  i = argv.index("-mllvm")
  assert argv[i + 1] == "-foo" and argv.index("-x") > i and argv[-1] == "-S"
  assert argv.count("-emit-obj") == 0


def test_clean_cc1_flags():
  flags = ["/usr/bin/clang", "-cc1", "-triple", "x86_64-pc-linux-gnu", "-emit-llvm-bc",
           "-emit-llvm-uselists", "-disable-llvm-passes", "-Oz", "-fembed-bitcode=all",
           "-main-file-name", "a.c", "-dependency-file", "a.d", "-MT", "a.o",
           "-o", "a.bc", "-x", "c", "a.c"]
  assert fmt.clean_cc1_flags(flags) == ["-cc1", "-triple", "x86_64-pc-linux-gnu", "-Oz",
                                        "-main-file-name", "a.c"]
  assert fmt.clean_cc1_flags(["-Oz", "-emit-obj"]) == ["-cc1", "-Oz"]


# ---------------------------------------------------------------------------------------
# mlgo-utils interoperability


def _mlgo_utils_module(name):
  """Imports a module of the mlgo-utils package from the venv by file path (its top-level
  package is also called `mlgo`, which our package shadows)."""
  path = pathlib.Path(sysconfig.get_paths()["purelib"]) / "mlgo" / "corpus" / f"{name}.py"
  if not path.exists():
    pytest.skip(f"mlgo-utils not installed ({path})")
  spec = importlib.util.spec_from_file_location(f"mlgo_utils_{name}", path)
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod


def test_import_extract_ir_corpus(tmp_path):
  """A corpus made by mlgo-utils' extract_ir (objects with embedded bitcode) loads as it
  is, metadata inferred, and compiles to the same object as clang -Oz -c."""
  extract_ir_lib = _mlgo_utils_module("extract_ir_lib")
  objs = tmp_path / "build"
  src = _tinypkg_root() / "src"
  for sub, rel, drv, extra in (("lib", "checksum.c", TC.clang, []),
                               ("cxx", "table.cc", TC.clangxx, ["-std=c++17"])):
    (objs / sub).mkdir(parents=True)
    subprocess.run([drv, "-Oz", *extra, "-Xclang", "-fembed-bitcode=all", "-c",
                    str(src / rel), "-o", str(objs / sub / (rel + ".o"))], check=True)
    subprocess.run([drv, "-Oz", *extra, "-c", str(src / rel), "-o",
                    str(tmp_path / (rel + ".ref.o"))], check=True)
  out = tmp_path / "extracted"
  extractors = extract_ir_lib.load_from_directory(str(objs), str(out))
  names = [e.extract(llvm_objcopy_path=os.path.join(TC.bin_dir, "llvm-objcopy"))
           for e in extractors]
  extract_ir_lib.write_corpus_manifest(None, names, str(out))

  c = corpus_lib.load_corpus(out)
  assert not c.problems
  assert sorted(m.name for m in c.modules) == ["cxx/table.cc.o", "lib/checksum.c.o"]
  assert c.llvm_version == 22 and c.provenance["llvm_version"] == "bitcode producer"
  assert c.opt_level == "Oz" and c.provenance["modules"] == "inferred"
  by = c.by_name()
  assert by["cxx/table.cc.o"].language == "c++" and by["lib/checksum.c.o"].language == "c"
  assert by["cxx/table.cc.o"].package == "cxx" and by["lib/checksum.c.o"].package == "lib"
  for name, rel in (("lib/checksum.c.o", "checksum.c"), ("cxx/table.cc.o", "table.cc")):
    m = by[name]
    assert m.split == corpus_lib.split_for(name)
    o = tmp_path / f"{rel}.re.o"
    subprocess.run(m.compile_argv(TC.clang, str(o)), check=True)
    assert toolchain_lib.text_size(str(o)) == \
        toolchain_lib.text_size(str(tmp_path / (rel + ".ref.o"))) > 0

  # make_corpus --import adds our metadata; the result is still mlgo-utils format.
  stats = build.import_corpus(out, tmp_path / "imported")
  assert stats["modules"] == 2 and stats["c++_modules"] == 1
  c2 = corpus_lib.load_corpus(tmp_path / "imported")
  assert c2.provenance["llvm_version"] == "metadata"
  assert [(m.name, m.language, m.split) for m in c2.modules] == \
      [(m.name, m.language, m.split) for m in sorted(c.modules, key=lambda m: m.name)]


def test_import_make_corpus_with_global_override(tmp_path, units):
  """mlgo-utils' make_corpus: bare .bc files plus a global_command_override, no .cmd."""
  make_corpus_lib = _mlgo_utils_module("make_corpus_lib")
  _, res = units
  bcdir = tmp_path / "bcs" / "pkg"
  bcdir.mkdir(parents=True)
  shutil.copy(res["checksum.c"].bc, bcdir / "checksum.bc")
  out = tmp_path / "corpus"
  rels = make_corpus_lib.load_bitcode_from_directory(str(tmp_path / "bcs"))
  make_corpus_lib.copy_bitcode(rels, str(tmp_path / "bcs"), str(out))
  override = ["-cc1", "-triple", "x86_64-pc-linux-gnu", "-Oz"]
  make_corpus_lib.write_corpus_manifest(rels, str(out), override)
  c = corpus_lib.load_corpus(out)
  assert [m.name for m in c.modules] == ["pkg/checksum"]
  m = c.modules[0]
  assert m.cc1_flags == override and c.global_command_override == override
  assert c.opt_level == "Oz"
  o = tmp_path / "o.o"
  subprocess.run(m.compile_argv(TC.clang, str(o)), check=True)
  assert toolchain_lib.text_size(str(o)) > 0


# ---------------------------------------------------------------------------------------
# Split


def test_split_deterministic_and_about_20_percent():
  names = [f"pkg{i % 17}/dir{i % 5}/file{i}.c" for i in range(20000)]
  first = [corpus_lib.split_for(n) for n in names]
  assert first == [corpus_lib.split_for(n) for n in names]
  assert first[::-1] == [corpus_lib.split_for(n) for n in reversed(names)]
  frac = first.count("heldout") / len(first)
  assert 0.19 < frac < 0.21
  assert set(first) == {"train", "heldout"}
  assert corpus_lib.split_for("x", 0.0) == "train" and corpus_lib.split_for("x", 1.0) == "heldout"


def test_split_same_in_another_process():
  """Not Python's salted hash(): a fresh interpreter with another hash seed agrees."""
  names = [f"zlib/m{i}.c" for i in range(200)]
  code = ("import sys; from mlgo.corpus import split_for; "
          "print(''.join('h' if split_for(n) == 'heldout' else 't' "
          "for n in sys.argv[1:]))")
  env = dict(os.environ, PYTHONHASHSEED="12345",
             PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
  out = subprocess.run([sys.executable, "-c", code, *names], env=env, check=True,
                       capture_output=True, text=True).stdout.strip()
  assert out == "".join("h" if corpus_lib.split_for(n) == "heldout" else "t" for n in names)


# ---------------------------------------------------------------------------------------
# Errors: one line, naming the file; lenient loading keeps the other modules.


def _one_line_naming(msg: str, path) -> bool:
  return "\n" not in msg and str(path) in msg


def test_corrupt_truncated_and_missing_files(tmp_path, units):
  path = _write(tmp_path, units)
  # Three more copies of checksum.c, then break each differently.
  desc = json.loads((path / "corpus_description.json").read_text())
  for n in ("corrupt", "trunc", "nocmd", "nobc"):
    shutil.copy(path / "tinypkg/checksum.c.bc", path / f"tinypkg/{n}.c.bc")
    shutil.copy(path / "tinypkg/checksum.c.cmd", path / f"tinypkg/{n}.c.cmd")
    desc["modules"].append(f"tinypkg/{n}.c")
  (path / "corpus_description.json").write_text(json.dumps(desc))
  (path / "tinypkg/corrupt.c.bc").write_bytes(b"\x7fELF garbage, not bitcode" * 10)
  data = (path / "tinypkg/trunc.c.bc").read_bytes()
  (path / "tinypkg/trunc.c.bc").write_bytes(data[:len(data) // 2])
  (path / "tinypkg/nocmd.c.cmd").unlink()
  (path / "tinypkg/nobc.c.bc").unlink()

  c = corpus_lib.load_corpus(path)
  assert sorted(m.name for m in c.modules) == ["tinypkg/checksum.c", "tinypkg/table.cc"]
  probs = {p.name: p.message for p in c.problems}
  assert set(probs) == {f"tinypkg/{n}.c" for n in ("corrupt", "trunc", "nocmd", "nobc")}
  assert _one_line_naming(probs["tinypkg/corrupt.c"], path / "tinypkg/corrupt.c.bc")
  assert "not LLVM bitcode" in probs["tinypkg/corrupt.c"]
  assert _one_line_naming(probs["tinypkg/trunc.c"], path / "tinypkg/trunc.c.bc")
  assert "truncated" in probs["tinypkg/trunc.c"]
  assert _one_line_naming(probs["tinypkg/nocmd.c"], path / "tinypkg/nocmd.c.cmd")
  assert "missing command line" in probs["tinypkg/nocmd.c"]
  assert _one_line_naming(probs["tinypkg/nobc.c"], path / "tinypkg/nobc.c.bc")

  with pytest.raises(corpus_lib.CorpusError) as e:
    corpus_lib.load_corpus(path, strict=True)
  assert _one_line_naming(str(e.value), path / "tinypkg/corrupt.c.bc")


@pytest.mark.parametrize("text,expect", [
    ('{"modules": ["a", "b"', "malformed JSON at line 1"),
    ("[1, 2]", "expected a JSON object"),
    ('{"modules": "a"}', '"modules" must be a list'),
    ('{"modules": [], "has_thinlto": false, "global_command_override": ["<UNSPECIFIED>"]}',
     "<UNSPECIFIED>"),
])
def test_malformed_description(tmp_path, text, expect):
  (tmp_path / "corpus_description.json").write_text(text)
  with pytest.raises(corpus_lib.CorpusError) as e:
    corpus_lib.load_corpus(tmp_path)
  msg = str(e.value)
  assert _one_line_naming(msg, tmp_path / "corpus_description.json") and expect in msg


def test_missing_description_and_directory(tmp_path):
  with pytest.raises(corpus_lib.CorpusError) as e:
    corpus_lib.load_corpus(tmp_path)
  assert "corpus_description.json" in str(e.value) and "missing" in str(e.value)
  with pytest.raises(corpus_lib.CorpusError) as e:
    corpus_lib.load_corpus(tmp_path / "nope")
  assert str(tmp_path / "nope") in str(e.value)


def test_bitcode_producer_and_version_check(tmp_path, units):
  _, res = units
  producer = bitcode.inspect_bitcode(res["checksum.c"].bc)
  assert producer.startswith("LLVM22.")
  assert bitcode.producer_llvm_version(producer) == 22
  c = corpus_lib.load_corpus(_write(tmp_path, units))
  c.check_llvm_version(22)
  with pytest.raises(corpus_lib.CorpusError) as e:
    c.check_llvm_version(19)
  assert "LLVM 22" in str(e.value) and "LLVM 19" in str(e.value)
  # LLVM 19's bitcode is recognized as such.
  clang19 = "/usr/lib/llvm-19/bin/clang"
  if os.path.exists(clang19):
    o = tmp_path / "x19.bc"
    subprocess.run([clang19, "-Oz", "-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c",
                    str(_tinypkg_root() / "src/checksum.c"), "-o", str(o)], check=True)
    assert bitcode.producer_llvm_version(bitcode.inspect_bitcode(str(o))) == 19


def test_kind_inferred_and_recorded(tmp_path, units):
  assert corpus_lib.kind_of("leveldb/db/db_test.cc") == "test"
  assert corpus_lib.kind_of("fmtlib/test/fuzzing/chrono-duration.cc") == "test"
  assert corpus_lib.kind_of("snappy/snappy_benchmark.cc") == "test"
  assert corpus_lib.kind_of("leveldb/util/testutil.cc") == "library"
  assert corpus_lib.kind_of("zlib/deflate.c") == "library"
  c = corpus_lib.load_corpus(_write(tmp_path, units))
  assert {m.kind for m in c.modules} == {"library"}
  meta = json.loads((c.path / "mlgo_modules.json").read_text())
  assert meta["modules"]["tinypkg/checksum.c"]["kind"] == "library"
