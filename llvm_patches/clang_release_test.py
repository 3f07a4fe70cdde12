"""//llvm_patches:clang_release: Debian's clang-22/llc-22 with the shipped models compiled
into a relinked libLLVM (release mode), checked against the other two release routes.

- Inlining: `PREFIX/bin/clang -mllvm -enable-ml-inliner=release` gives objects
  byte-identical to stock clang-22 with the inline advisor plugin of the same model
  (models/inlining_oz_small) on real corpus modules (Debian's bzip2 and tinyxml2).
- Eviction: `PREFIX/bin/llc -regalloc-enable-advisor=release` gives objects
  byte-identical to stock llc-22 answered by advisor_server (models/regalloc_eviction).
- Guarded eviction compiles (per function the better of default and model) with the
  compiled-in model match guarded compiles answered on the channel.
- Compiles are deterministic; without the ML flags the prefix compiles exactly as stock
  clang-22; the prefix builds bzip2, which links and round-trips data.
- The pinned Debian versions are installed, and a mismatch is a clear error.
"""
import filecmp
import json
import os
import pathlib
import pwd
import subprocess
import sys

import pytest

from mlgo.corpus import build as corpus_build
from mlgo.corpus import load_corpus
from mlgo.corpus import sources
from mlgo.export import server as srv
from mlgo.util.toolchain import toolchain

PREFIX = pathlib.Path("llvm_patches/clang_release").resolve()
PLUGIN = pathlib.Path("cc/inline_plugin/plugin_inlining_oz_small.so").resolve()
SERVER = pathlib.Path("llvm_patches/server_regalloc_eviction").resolve()
SCRIPT = pathlib.Path("llvm_patches/release_prefix.py").resolve()
PINS = pathlib.Path("llvm_patches/debian_pins.json").resolve()
PACKAGES = ["bzip2", "tinyxml2"]  # one C, one C++ library of the default corpus set
TC = toolchain(22)
INLINE_RELEASE = ["-mllvm", "-enable-ml-inliner=release"]


def _source_cache() -> pathlib.Path:
  # Bazel's test environment may hide $HOME; the passwd home finds the shared cache.
  home = os.environ.get("MLGO_HOME") or pathlib.Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "mlgo"
  return pathlib.Path(home) / "sources"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  out = tmp_path_factory.mktemp("corpus") / "c"
  corpus_build.make_corpus(out, PACKAGES, opt="Oz", jobs=2, llvm_version=22,
                           cache=_source_cache())
  c = load_corpus(out)
  assert len(c.modules) >= 10 and {m.language for m in c.modules} == {"c", "c++"}
  return c


def _run(argv, **kw):
  res = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=300, **kw)
  assert res.returncode == 0, f"{argv[:3]}...: {res.stderr[-2000:]}"
  return res


def _stem(m):
  return m.name.replace("/", "_")


def test_prefix_layout():
  for rel in ("bin/clang", "bin/llc", "bin/opt", "lib/libLLVM.so.22.1", "lib/libclang-cpp.so.22.1",
              "lib/clang/22/include/stddef.h", "share/mlgo/release.json"):
    assert (PREFIX / rel).is_file(), rel
  assert os.readlink(PREFIX / "bin" / "clang++") == "clang"
  assert os.readlink(PREFIX / "lib" / "libLLVM.so") == "libLLVM.so.22.1"
  # The copied Debian binary loads the relinked library, with no environment variable.
  ldd = _run(["ldd", PREFIX / "bin" / "clang"], env={"PATH": os.environ["PATH"]}).stdout
  lib_line = next(l for l in ldd.splitlines() if "libLLVM.so.22.1" in l)
  loaded = lib_line.split("=>")[1].split("(")[0].strip()
  assert os.path.realpath(loaded) == os.path.realpath(PREFIX / "lib/libLLVM.so.22.1"), lib_line
  info = json.loads((PREFIX / "share/mlgo/release.json").read_text())
  assert set(info["models"]) == {"InlinerSizeModel", "RegAllocEvictModel"}


def _dynamic_symbols(lib) -> set:
  out = _run(["nm", "-D", "--defined-only", "--with-symbol-versions", lib]).stdout
  return {line.split()[-1] for line in out.splitlines() if line.strip()}


def test_exports_every_symbol_of_debians_libllvm():
  """Same ABI as the library Debian's binaries were linked against: every exported
  symbol, with its LLVM_22.1 version; extras are the models' (and a few Polly/isl ones)."""
  debian = _dynamic_symbols(os.path.realpath("/usr/lib/llvm-22/lib/libLLVM.so.22.1"))
  ours = _dynamic_symbols(PREFIX / "lib/libLLVM.so.22.1")
  assert len(debian) > 50000
  assert sorted(debian - ours)[:10] == []
  extra = ours - debian
  assert any("InlinerSizeModel" in s for s in extra) and any("RegAllocEvictModel" in s for s in extra)
  assert len(extra) < 500


def test_pins_installed_and_mismatch_is_a_clear_error(tmp_path):
  res = subprocess.run([sys.executable, SCRIPT, "check-pins", "--pins", PINS],
                       capture_output=True, text=True)
  assert res.returncode == 0, res.stderr
  pins = json.loads(PINS.read_text())
  pins["version"] = "1:22.1.99-1"
  bad = tmp_path / "pins.json"
  bad.write_text(json.dumps(pins))
  res = subprocess.run([sys.executable, SCRIPT, "check-pins", "--pins", bad],
                       capture_output=True, text=True)
  assert res.returncode != 0
  assert "clang-22: installed 1:22.1.8" in res.stderr and "pinned 1:22.1.99-1" in res.stderr
  assert "debian_pins.json" in res.stderr


def test_stock_clang_has_no_model_the_prefix_has(tmp_path):
  src = tmp_path / "x.c"
  src.write_text("static int f(int x){return x*3;} int g(int y){return f(y)+1;}\n")
  stock = subprocess.run([TC.clang, "-Oz", *INLINE_RELEASE, "-c", src, "-o", tmp_path / "s.o"],
                         capture_output=True, text=True)
  assert stock.returncode != 0 and "Could not setup Inlining Advisor" in stock.stderr
  _run([PREFIX / "bin/clang", "-Oz", *INLINE_RELEASE, "-c", src, "-o", tmp_path / "r.o"])


def test_inliner_release_matches_plugin_on_corpus(corpus, tmp_path):
  same, changed_vs_default = [], 0
  for m in corpus.modules:
    rel, plug, dflt = (tmp_path / f"{_stem(m)}.{k}.o" for k in ("rel", "plug", "def"))
    _run(m.compile_argv(str(PREFIX / "bin/clang"), rel, INLINE_RELEASE))
    _run(m.compile_argv(TC.clang, plug, [f"-fpass-plugin={PLUGIN}"]))
    _run(m.compile_argv(TC.clang, dflt))
    same.append((m.name, filecmp.cmp(rel, plug, shallow=False)))
    changed_vs_default += not filecmp.cmp(rel, dflt, shallow=False)
  assert [n for n, s in same if not s] == []
  # The model is really in charge: it changes some modules against the default heuristic.
  assert changed_vs_default >= 3


def test_loop_stats_edit_is_built_in_and_changes_no_decision(corpus, tmp_path):
  """source_edits.py's FunctionPropertiesAnalysis edit is compiled in (its option exists:
  stock clang rejects it), and the upstream behaviour it skips (recomputing LoopInfo after
  each inlining) gives the same objects: no inlining model reads loop statistics."""
  info = json.loads((PREFIX / "share/mlgo/release.json").read_text())
  assert sorted(info["edited_sources"]) == [
      "llvm/lib/Analysis/FunctionPropertiesAnalysis.cpp", "llvm/lib/Analysis/InlineCost.cpp",
      "llvm/lib/Analysis/MLInlineAdvisor.cpp"]
  upstream = INLINE_RELEASE + ["-mllvm", "-mlgo-fpi-update-loop-stats"]
  stock = subprocess.run([TC.clang, "-mllvm", "-mlgo-fpi-update-loop-stats", "-c", "-x", "c",
                          "/dev/null", "-o", tmp_path / "n.o"], capture_output=True, text=True)
  assert stock.returncode != 0 and "mlgo-fpi-update-loop-stats" in stock.stderr
  for m in corpus.modules[::2]:
    a, b = tmp_path / f"{_stem(m)}.mlgo.o", tmp_path / f"{_stem(m)}.upstream.o"
    _run(m.compile_argv(str(PREFIX / "bin/clang"), a, INLINE_RELEASE))
    _run(m.compile_argv(str(PREFIX / "bin/clang"), b, upstream))
    assert filecmp.cmp(a, b, shallow=False), m.name


def test_fpi_fast_changes_no_decision(corpus, tmp_path):
  """source_edits.py's fast function properties (no LoopInfo, no new dominator tree, one
  walk of each block) for the advisor: upstream's computation (-mlgo-fpi-fast=0) gives the
  same objects, and the check mode, which computes both and stops at the first difference,
  passes on every corpus module."""
  _check_mode_matches_off_on_corpus(corpus, tmp_path, ["-mlgo-check-fpi-fast"],
                                    ["-mlgo-fpi-fast=0"], compare_every_other=1)


# A function with two loops (one nested) and a block no path reaches.
LOOPS_IR = """\
define i32 @f(i32 %n) {
entry:
  br label %outer
outer:
  %i = phi i32 [ 0, %entry ], [ %i1, %outer.latch ]
  br label %inner
inner:
  %j = phi i32 [ 0, %outer ], [ %j1, %inner ]
  %j1 = add i32 %j, 1
  %c = icmp slt i32 %j1, %n
  br i1 %c, label %inner, label %outer.latch
outer.latch:
  %i1 = add i32 %i, 1
  %d = icmp slt i32 %i1, %n
  br i1 %d, label %outer, label %exit
exit:
  ret i32 %i1
dead:
  ret i32 0
}
"""


def test_other_users_of_function_properties_keep_loop_statistics(tmp_path):
  """The fast path is the ML advisor's only: opt's printer in the prefix still reports the
  loop statistics (and skips the unreachable block), as stock opt does."""
  ll = tmp_path / "loops.ll"
  ll.write_text(LOOPS_IR)
  argv = ["-passes=print<func-properties>", "-disable-output", ll]
  ours = _run([PREFIX / "bin/opt", *argv]).stderr
  assert "TopLevelLoopCount: 1" in ours and "MaxLoopDepth: 2" in ours
  assert "BasicBlockCount: 5" in ours
  assert ours == _run([TC.opt, *argv]).stderr


def _mllvm(*options):
  return [a for o in options for a in ("-mllvm", o)]


def _check_mode_matches_off_on_corpus(corpus, tmp_path, check, off, compare_every_other):
  """Compiles every corpus module with the check-mode options CHECK (the compile stops
  at a difference) and every other one also with OFF; the objects must be the same."""
  for i, m in enumerate(corpus.modules):
    a, b = tmp_path / f"{_stem(m)}.check.o", tmp_path / f"{_stem(m)}.off.o"
    _run(m.compile_argv(str(PREFIX / "bin/clang"), a, INLINE_RELEASE + _mllvm(*check)))
    if i % 2 == compare_every_other:
      _run(m.compile_argv(str(PREFIX / "bin/clang"), b, INLINE_RELEASE + _mllvm(*off)))
      assert filecmp.cmp(a, b, shallow=False), m.name


def _check_mode_matches_off_on_ir(tmp_path, ir, check, off, output=("-c",)):
  """Compiles IR at -Oz in release mode with the check-mode options CHECK and with OFF;
  returns both outputs (bytes), which the caller compares."""
  ll = tmp_path / "module.ll"
  ll.write_text(ir)
  outs = {}
  for name, options in (("check", check), ("off", off)):
    out = tmp_path / f"{name}.out"
    _run([PREFIX / "bin/clang", "-Oz", *INLINE_RELEASE, *_mllvm(*options), *output, ll,
          "-o", out])
    outs[name] = out.read_bytes()
  return outs["check"], outs["off"]


def test_merged_cost_walk_changes_no_decision(corpus, tmp_path):
  """source_edits.py's merged walk (one walk of the callee for the cost estimate and the
  features): upstream's two walks (-mlgo-merged-cost-walk=0) give the same objects, and the
  check mode, which computes both ways at every call site and stops the compile at the
  first difference, passes on every corpus module."""
  _check_mode_matches_off_on_corpus(corpus, tmp_path, ["-mlgo-check-merged-cost-walk"],
                                    ["-mlgo-merged-cost-walk=0"], compare_every_other=0)


# A callee whose inner call carries "call-inline-cost": the cost walk skips that call's
# body, the features walk does not, so the merged walk has to walk the features again.
CALL_INLINE_COST_IR = """\
target triple = "x86_64-pc-linux-gnu"
declare i32 @ext(i32, i32, i32)
define internal i32 @callee(i32 %x) minsize {
  %a = call i32 @ext(i32 %x, i32 1, i32 2) #1
  %b = add i32 %a, %x
  %c = call i32 @ext(i32 %b, i32 %a, i32 3)
  ret i32 %c
}
define i32 @caller1(i32 %y) minsize #0 {
  %r = call i32 @callee(i32 %y)
  ret i32 %r
}
define i32 @caller2(i32 %y) minsize #0 {
  %r = call i32 @callee(i32 7)
  ret i32 %r
}
attributes #0 = { minsize optsize }
attributes #1 = { "call-inline-cost"="40" }
"""


def test_merged_cost_walk_falls_back_when_the_walks_differ(tmp_path):
  merged, two = _check_mode_matches_off_on_ir(tmp_path, CALL_INLINE_COST_IR,
                                              ["-mlgo-check-merged-cost-walk"],
                                              ["-mlgo-merged-cost-walk=0"])
  assert merged == two


def test_walk_cache_and_memos_change_no_decision(corpus, tmp_path):
  """source_edits.py's walk cache (a callee's cost walk reused at a call site that looks
  the same to the walk), model memo (the model's answer reused for inputs seen before)
  and compatibility memo (the attribute checks per pair of attribute lists): without
  them the objects are the same, and their check modes, which walk, evaluate and check
  at every call site anyway and stop the compile at the first difference, pass on every
  corpus module."""
  _check_mode_matches_off_on_corpus(
      corpus, tmp_path,
      ["-mlgo-check-walk-cache", "-mlgo-check-model-memo", "-mlgo-check-compat-memo"],
      ["-mlgo-walk-cache=0", "-mlgo-model-memo=0", "-mlgo-compat-memo=0"],
      compare_every_other=1)


# Calls of one callee that differ in one thing the cost walk reads each (which constant
# an argument is, two arguments being one pointer, an alloca argument, a constant offset from
# another argument, a caller without minsize): if the walk cache's key missed any of
# them, the check mode would find the cached walk differs at that call.
WALK_KEY_IR = """\
target triple = "x86_64-pc-linux-gnu"
declare void @ext(i32)
define internal void @callee(i32 %x, ptr %p, ptr %q, i32 %n) {
entry:
  %c = icmp eq i32 %x, 7
  br i1 %c, label %a, label %b
a:
  call void @ext(i32 1)
  call void @ext(i32 2)
  br label %m
b:
  call void @ext(i32 3)
  br label %m
m:
  %e = icmp eq ptr %p, %q
  br i1 %e, label %same, label %loop
same:
  call void @ext(i32 4)
  ret void
loop:
  %i = phi i32 [ 0, %m ], [ %i1, %loop ]
  %l = load i32, ptr %p
  call void @ext(i32 %l)
  %i1 = add i32 %i, 1
  %d = icmp slt i32 %i1, %n
  br i1 %d, label %loop, label %done
done:
  ret void
}
define void @caller(i32 %y, ptr %r, ptr %s, i32 %n) minsize optsize {
  %buf = alloca i32
  store i32 0, ptr %buf
  call void @callee(i32 %y, ptr %r, ptr %s, i32 %n)
  call void @callee(i32 %y, ptr %r, ptr %s, i32 %n)
  call void @callee(i32 7, ptr %r, ptr %s, i32 %n)
  call void @callee(i32 9, ptr %r, ptr %s, i32 %n)
  call void @callee(i32 %y, ptr %r, ptr %r, i32 %n)
  call void @callee(i32 %y, ptr %buf, ptr %s, i32 %n)
  %g = getelementptr inbounds i8, ptr %r, i64 4
  call void @callee(i32 %y, ptr %g, ptr %r, i32 %n)
  call void @callee(i32 %y, ptr %r, ptr %s, i32 %n)
  ret void
}
define void @caller_no_minsize(i32 %y, ptr %r, ptr %s, i32 %n) optsize {
  call void @callee(i32 %y, ptr %r, ptr %s, i32 %n)
  ret void
}
"""


def test_walk_cache_key_tells_apart_what_the_walk_reads(tmp_path):
  cached, off = _check_mode_matches_off_on_ir(
      tmp_path, WALK_KEY_IR, ["-mlgo-check-walk-cache", "-mlgo-check-model-memo"],
      ["-mlgo-walk-cache=0", "-mlgo-model-memo=0"])
  assert cached == off


# One caller, two callees whose attribute lists differ only in strictfp (which makes
# the strictfp one incompatible): a compatibility memo keyed on less than both lists
# would give one callee the other's answer, and its check mode stops the compile.
COMPAT_IR = """\
target triple = "x86_64-pc-linux-gnu"
declare void @ext(i32)
define internal void @plain(i32 %x) {
  call void @ext(i32 %x)
  ret void
}
define internal void @strict(i32 %x) strictfp {
  call void @ext(i32 %x)
  ret void
}
define void @caller(i32 %y) minsize optsize {
  call void @strict(i32 %y)
  call void @plain(i32 %y)
  call void @strict(i32 1)
  call void @plain(i32 2)
  ret void
}
"""


def test_compat_memo_keeps_each_callees_answer(tmp_path):
  memo, off = _check_mode_matches_off_on_ir(tmp_path, COMPAT_IR, ["-mlgo-check-compat-memo"],
                                            ["-mlgo-compat-memo=0"],
                                            output=("-S", "-emit-llvm"))
  assert memo == off
  assert memo.decode().count("call fastcc void @strict(") == 2  # never inlined: strictfp


def test_prefix_without_ml_flags_compiles_like_stock(corpus, tmp_path):
  for m in corpus.modules[::3]:
    a, b = tmp_path / f"{_stem(m)}.p.o", tmp_path / f"{_stem(m)}.s.o"
    _run(m.compile_argv(str(PREFIX / "bin/clang"), a))
    _run(m.compile_argv(TC.clang, b))
    assert filecmp.cmp(a, b, shallow=False), m.name


def test_release_compiles_are_deterministic(corpus, tmp_path):
  flags = INLINE_RELEASE + ["-mllvm", "-regalloc-enable-advisor=release"]
  for m in corpus.modules:
    a, b = tmp_path / f"{_stem(m)}.1.o", tmp_path / f"{_stem(m)}.2.o"
    _run(m.compile_argv(str(PREFIX / "bin/clang"), a, flags))
    _run(m.compile_argv(str(PREFIX / "bin/clang"), b, flags))
    assert filecmp.cmp(a, b, shallow=False), m.name


def test_eviction_release_matches_advisor_server(corpus, tmp_path):
  """Optimized bitcode of every corpus module through llc -O2: the compiled-in eviction
  model and the server answering stock llc-22's channel give identical objects."""
  same, changed_vs_default = [], 0
  for m in corpus.modules:
    bc = tmp_path / f"{_stem(m)}.opt.bc"
    _run(m.compile_argv(TC.clang, bc, action="-emit-llvm-bc"))
    rel, chan, dflt = (tmp_path / f"{_stem(m)}.{k}.o" for k in ("rel", "chan", "def"))
    llc_args = ["-O2", "-filetype=obj", str(bc)]
    _run([PREFIX / "bin/llc", *llc_args, "-regalloc-enable-advisor=release", "-o", rel])
    res = srv.run_with_server(str(SERVER), "regalloc_eviction",
                              lambda flags: [TC.llc, *llc_args, *flags, "-o", str(chan)])
    assert res.ok, res
    _run([TC.llc, *llc_args, "-o", dflt])
    same.append((m.name, filecmp.cmp(rel, chan, shallow=False)))
    changed_vs_default += not filecmp.cmp(rel, dflt, shallow=False)
  assert [n for n, s in same if not s] == []
  assert changed_vs_default >= 3


def test_guarded_release_matches_guarded_channel(corpus, tmp_path):
  """Guarded compiles (mlgo.env.guarded) with the prefix's compiled-in eviction model
  and no Python policy give the same objects as guarded compiles of stock llc-22
  answered by the same model on the channel, per function the lower cost of the two."""
  from mlgo import env
  from mlgo.env import guarded
  from mlgo.policy import policy_io
  pol = policy_io.load_policy(pathlib.Path("models/regalloc_eviction").resolve())
  third = 0
  for m in corpus.modules:
    bc = tmp_path / f"{_stem(m)}.opt.bc"
    _run(m.compile_argv(TC.clang, bc, action="-emit-llvm-bc"))
    mod = env.LlcModule(m.name, str(bc), ["-O2"])
    rel, chan = tmp_path / "rel.o", tmp_path / "chan.o"
    g_rel = guarded.guarded_compile(mod, "regalloc_eviction", None,
                                    tool_path=str(PREFIX / "bin/llc"),
                                    policy_flags=["-regalloc-enable-advisor=release"],
                                    output_path=str(rel))
    g_chan = guarded.guarded_compile(mod, "regalloc_eviction", pol, output_path=str(chan))
    assert g_rel.ok and g_chan.ok, (m.name, g_rel.result.reason, g_chan.result.reason)
    # The channel's reward also lists, at cost 0, functions that only had a context.
    nonzero = lambda g: {f: v for f, v in g.scores.items() if v}
    assert g_rel.mismatches == [] and nonzero(g_rel) == nonzero(g_chan), m.name
    assert g_rel.policy_functions == g_chan.policy_functions, m.name
    assert filecmp.cmp(rel, chan, shallow=False), m.name
    third += g_rel.compiles == 3
  assert third >= 1   # at least one module needed the per-function third compile


def test_prefix_builds_bzip2_which_links_and_runs(tmp_path):
  """A real package (Debian's bzip2) built by the prefix with both models in charge."""
  src = sources.fetch_source("bzip2", _source_cache())
  units = ["blocksort", "huffman", "crctable", "randtable", "compress", "decompress", "bzlib",
           "bzip2"]
  flags = ["-Oz", *INLINE_RELEASE, "-mllvm", "-regalloc-enable-advisor=release",
           "-D_FILE_OFFSET_BITS=64", "-w"]
  objs = []
  for u in units:
    o = tmp_path / f"{u}.o"
    _run([PREFIX / "bin/clang", *flags, "-c", src / f"{u}.c", "-o", o])
    objs.append(o)
  exe = tmp_path / "bzip2"
  _run([PREFIX / "bin/clang", *objs, "-o", exe])
  data = tmp_path / "data.txt"
  data.write_bytes(b"".join(b"line %d of mlgo release-mode test data\n" % i for i in range(20000)))
  _run([exe, "-k", "-9", data])
  packed = tmp_path / "data.txt.bz2"
  assert 0 < packed.stat().st_size < data.stat().st_size // 10
  # Stock bzip2 semantics: the system's tool (if any) or our own binary decompresses it.
  out = _run([exe, "-d", "-c", packed]).stdout
  assert out.encode() == data.read_bytes()
  _run([exe, "-t", packed])
