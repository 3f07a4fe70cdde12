"""runtime_check's program table: roles and package sets, generated workloads, perf
detection, and one held-out program built through llc and run natively (plain, and
guarded with a profile)."""
import io
import json
import os
import pathlib
import subprocess

import pytest

from mlgo.corpus import sources
from mlgo.evaluation import runtime_build as rb
from mlgo.evaluation import runtime_check as rc
from mlgo.evaluation import runtime_programs as rp
from mlgo.evaluation import runtime_report as rr
from mlgo.util import cli
from mlgo.util.toolchain import toolchain

import runtime_testlib

SMALL_HELDOUT = "utf8proc"  # two translation units, runs in well under a second


def test_table_invariants():
  names = [p.name for p in rp.PROGRAMS]
  assert len(names) == len(set(names))
  model, heldout = rp.programs("model"), rp.programs("heldout")
  assert len(model) >= 8 and len(heldout) >= 6
  assert {"lua", "bzip2", "lz4"} <= {p.name for p in model}
  assert {"xxhsum", "libdeflate-gzip"} <= {p.name for p in heldout}
  for p in heldout + rp.programs("reserve"):  # never code a policy was trained on
    assert p.package in (sources.UNSEEN_PACKAGES + sources.EXTRA_PACKAGES
                         + sources.RUNTIME_ONLY_PACKAGES), p.name
    assert p.package not in sources.DEFAULT_PACKAGES, p.name
  corpus_sets = set().union(*sources.PACKAGE_SETS.values())
  assert not corpus_sets & set(sources.RUNTIME_ONLY_PACKAGES)
  for p in model:
    assert p.package not in sources.UNSEEN_PACKAGES + sources.EXTRA_PACKAGES, p.name
  for p in rp.PROGRAMS:
    assert p.role in rp.ROLES and p.workload and p.sources and p.args, p.name
    assert p.cxx == any(s.endswith(rb.CXX_EXTS) for s in p.sources), p.name
  assert any(p.cxx for p in heldout)


def test_driver_files_are_all_used_and_bring_their_shared_header(tmp_path):
  from mlgo.evaluation import runtime_drivers as rd  # pylint: disable=import-outside-toplevel
  on_disk = {p.read_text() for p in rd.DRIVERS.iterdir()}
  written = {}
  for p in rp.PROGRAMS:
    for name, text in p.gen_files.items():
      assert text.strip(), (p.name, name)
      written[(p.name, name)] = text
      if '#include "mlgo_read_file.h"' in text:
        assert "mlgo_read_file.h" in p.gen_files, p.name  # written beside the driver
  assert set(written.values()) == on_disk  # no orphan file in drivers/, none missing
  # The renamed spec writes the generic name a package's sources include.
  assert rd.gen_files(("config.h", "cmark_config.h")).keys() == {"config.h"}
  with pytest.raises(FileNotFoundError, match="no_such_run.c"):
    rd.gen_files("no_such_run.c")
  # The shared header is a self-contained C header.
  hdr = tmp_path / "use.c"
  hdr.write_text(f'#include "{rd.DRIVERS}/mlgo_read_file.h"\n'
                 f'#include "{rd.DRIVERS}/mlgo_read_file.h"\n'  # the guard holds
                 "int main(void) { size_t n; return read_file(\"x\", &n) && fnv1a(\"\", 0); }\n")
  subprocess.run([toolchain().clang, "-fsyntax-only", "-Werror", str(hdr)], check=True)


def test_programs_by_role_and_selection(monkeypatch):
  assert rp.programs() == rp.PROGRAMS
  assert (sorted(p.name for r in rp.ROLES for p in rp.programs(r))
          == sorted(p.name for p in rp.PROGRAMS))
  # Reserve programs run only when asked for, by name or by role.
  spare = rp.Program("spare", "xxhash", ["x.c"], [], [], ["{input}"], None, role="reserve",
                     workload="a stand-in")
  monkeypatch.setattr(rp, "PROGRAMS", rp.PROGRAMS + [spare])
  assert "spare" not in [p.name for p in rp.select()]
  assert "spare" not in [p.name for p in rp.select(role="heldout")]
  assert [p.name for p in rp.select(role="reserve")][-1] == "spare"
  assert [p.name for p in rp.select(["spare", "lua"])] == ["lua", "spare"]
  assert len(rp.select()) == len(rp.PROGRAMS) - len(rp.programs("reserve"))
  monkeypatch.undo()
  with pytest.raises(ValueError, match="unknown role"):
    rp.programs("training")
  assert [p.name for p in rp.select(["cmark", "lua"], role="heldout")] == ["cmark"]
  with pytest.raises(ValueError, match="unknown programs"):
    rp.select(["nosuchprogram"])
  for p in rp.PROGRAMS:
    assert p.name in rp.describe()


def test_workload_is_deterministic_and_args_resolve(tmp_path):
  a, b = tmp_path / "a", tmp_path / "b"
  inp, script = rp.write_workload(a)
  rp.write_workload(b)
  files = sorted(f.name for f in a.iterdir() if f.is_file())
  assert {"input.txt", "bench.lua", "doc.md", "doc.xml", "doc.json", "doc.yaml",
          "utf8.txt"} <= set(files)
  for f in files:
    assert (a / f).read_bytes() == (b / f).read_bytes(), f
    assert (a / f).stat().st_size > 1000, f
  assert os.readlink(a / "xmlwf.out" / "doc.xml") == "/dev/stdout"
  rp.write_workload(a)  # again over an existing directory
  for p in rp.PROGRAMS:
    args = rp.program_args(p, inp, script)
    assert not any(x in " ".join(args) for x in ("{input}", "{script}", "{work}")), p.name
    for x in args:
      if x.startswith(str(a)) and "xmlwf.out" not in x:
        assert pathlib.Path(x).is_file(), (p.name, x)
  grep = rp.program_args(next(p for p in rp.PROGRAMS if p.name == "pcre2grep"), inp, script)
  assert any("{4,}" in x for x in grep)  # a regex's braces are not placeholders


def test_perf_detection_says_why():
  ok, why = rc.perf_available()
  assert isinstance(ok, bool) and why
  counts = rc._perf_counts("123456,,instructions:u,100.00,,\n<not supported>,,cycles:u,0,0,,\n")
  assert counts == {"instructions": 123456}


@pytest.fixture()
def small_program(tmp_path, monkeypatch):
  """The small held-out program, its Debian source in MLGO_HOME's cache."""
  return runtime_testlib.program_with_source(SMALL_HELDOUT, tmp_path, monkeypatch)


def test_small_heldout_program_builds_and_runs_deterministically(tmp_path, small_program):
  prog = small_program
  assert prog.role == "heldout"
  work = tmp_path / "work"
  inp, script = rp.write_workload(work)
  p, src = rp.prepare_program(prog, work)
  exe = rb.build_program(p, src, work / p.name / "default", "regalloc_eviction", None, None,
                         jobs=2)
  args = rp.program_args(p, inp, script)
  outs = [subprocess.run([str(exe)] + args, cwd=work, capture_output=True, check=True,
                         timeout=120).stdout for _ in range(2)]
  assert outs[0] and outs[0] == outs[1]
  assert b"# nfc " in outs[0]


def test_guarded_pgo_run_on_the_small_program(tmp_path, small_program):
  """runtime_check --guarded --pgo on one held-out program: the workload is profiled
  once, both sides compile with the profile (branch weights in the bitcode), the guarded
  build is per function no costlier than the default, and the outputs agree."""
  model = next(p for p in cli.runfile_candidates("models/regalloc_eviction")
               if (p / "policy.json").exists())
  out = tmp_path / "rc"
  (row,) = rc.run("regalloc_eviction", model, out, programs=[SMALL_HELDOUT], guarded=True,
                  pgo=True, layouts=2)
  assert row["program"] == SMALL_HELDOUT and row["default"]["cycles"] > 0
  assert (out / f"pgo-{SMALL_HELDOUT}" / f"{SMALL_HELDOUT}.profdata").stat().st_size > 0
  for side in ("default", "guarded"):
    bcs = sorted((out / SMALL_HELDOUT / side).glob("*.o.bc"))
    assert bcs
    ir = subprocess.run([toolchain(22).bin_dir + "/llvm-dis", str(bcs[0]),
                         "-o", "-"], capture_output=True, text=True, check=True).stdout
    assert "branch_weights" in ir, side
  d = json.loads((out / SMALL_HELDOUT / "default" / "functions.json").read_text())
  g = json.loads((out / SMALL_HELDOUT / "guarded" / "functions.json").read_text())
  assert all(g.get(f, 0.0) <= v + 1e-6 for f, v in d.items())
  assert sum(g.values()) < sum(d.values())
  # Layouts: the plain link first, then two more per side; the verdict is computed.
  for side in ("default", "policy"):
    assert len(row["layouts"][side]) == 3 and row["layouts"][side][0] == row[side]
    assert len({m["cycles"] for m in row["layouts"][side]}) > 1, side  # the layout matters
  assert rr.layout_summary(row)["layouts"] == 3
  assert row["over_layouts"] == rr.layout_summary(row)
  # A second run into the same dir asking for one layout more measures only that one on
  # the default side (its first three come from the cache).
  log = io.StringIO()
  (again,) = rc.run("regalloc_eviction", model, out, programs=[SMALL_HELDOUT],
                    guarded=True, pgo=True, layouts=3, stream=log)
  assert "(default) from" in log.getvalue()
  assert "running utf8proc (default) in layout 3/3" in log.getvalue()
  assert "(default) in layout 1/3" not in log.getvalue()
  assert again["layouts"]["default"][:3] == row["layouts"]["default"]
  assert len(again["layouts"]["policy"]) == 4


def _symbol_address(exe, name):
  nm = subprocess.run([toolchain(22).bin_dir + "/llvm-nm", str(exe)], capture_output=True,
                      text=True, check=True).stdout
  return next(int(line.split()[0], 16) for line in nm.splitlines()
              if line.split()[-1] == name)


def test_layouts_move_code_and_data_but_not_behaviour(tmp_path, small_program):
  """A relink in another layout keeps the objects' code and the program's output; the
  addresses of functions and data move, and each layout is the same on every link."""
  work = tmp_path / "work"
  inp, script = rp.write_workload(work)
  p, src = rp.prepare_program(small_program, work)
  build = work / p.name / "default"
  exe0 = rb.build_program(p, src, build, "regalloc_eviction", None, None, jobs=2)
  args = rp.program_args(p, inp, script)
  run = lambda exe: subprocess.run([str(exe)] + args, cwd=work, capture_output=True,
                                   check=True, timeout=120).stdout
  out0 = run(exe0)
  mains = {_symbol_address(exe0, "main")}
  tables = {_symbol_address(exe0, "utf8proc_properties")}  # read-only data
  for i in (1, 2):
    exe = rb.relink_layout(p, build, i)
    assert exe == build / f"layout-{i}" / p.name
    assert run(exe) == out0
    mains.add(_symbol_address(exe, "main"))
    tables.add(_symbol_address(exe, "utf8proc_properties"))
    again = rb.relink_layout(p, build, i)
    assert again.read_bytes() == exe.read_bytes()  # a layout is a fixed recipe
  assert len(mains) == 3 and len(tables) == 3
  assert rb.layout_padding(1) != rb.layout_padding(2)
  (build / rb._obj_name(p.sources[0])).unlink()
  with pytest.raises(FileNotFoundError, match="missing"):
    rb.relink_layout(p, build, 3)


def test_code_layouts_move_code_inside_functions_not_the_allocation(tmp_path, small_program):
  """rebuild_layout compiles a side's allocation again with other offsets inside its
  functions: a guarded build is replayed from its records (the same remarks cost per
  function, so the same allocation), the objects' bytes move, the output does not, and
  the executed instructions stay within a hair (the padding is never run)."""
  model = next(p for p in cli.runfile_candidates("models/regalloc_eviction")
               if (p / "policy.json").exists())
  from mlgo.policy import policy_io  # pylint: disable=import-outside-toplevel
  pol = policy_io.load_policy(model)
  work = tmp_path / "work"
  inp, script = rp.write_workload(work)
  p, src = rp.prepare_program(small_program, work)
  recipe = dict(problem="regalloc_eviction", spec=pol.spec, weights=pol.arch.w, jobs=2,
                guarded=True)
  build = work / p.name / "guarded"
  exe0 = rb.build_program(p, src, build, **recipe)
  records = json.loads((build / rb.GUARD_RECORDS).read_text())
  assert set(records) == set(p.sources)
  assert any(r["policy_functions"] for r in records.values())  # the policy won somewhere
  args = rp.program_args(p, inp, script, relative=True)
  ir = lambda exe: rb.cachegrind(exe, args, work, tmp_path / "cg.out")
  out0, ev0 = ir(exe0)
  scores0 = json.loads((build / "functions.json").read_text())
  for i in (1, 2):
    exe = rb.rebuild_layout(p, src, build, recipe, i)
    assert exe == build / f"layout-{i}" / f"layout-{i}" / p.name
    lay = build / f"layout-{i}"
    assert json.loads((lay / "functions.json").read_text()) == pytest.approx(scores0)
    assert json.loads((lay / rb.GUARD_RECORDS).read_text()) == records
    obj = rb._obj_name(p.sources[0])
    assert (lay / obj).read_bytes() != (build / obj).read_bytes()
    out, ev = ir(exe)
    assert out == out0
    assert abs(ev["Ir"] - ev0["Ir"]) <= 1e-4 * ev0["Ir"]
  assert [rb.code_layout_flags(i) for i in (1, 2, 3, 4, 5)] == [
      ("-align-all-nofallthru-blocks=1",), ("-align-all-nofallthru-blocks=2",),
      ("-align-all-nofallthru-blocks=3",), ("-align-all-nofallthru-blocks=4",),
      ("-align-all-nofallthru-blocks=1",)]
  with pytest.raises(ValueError, match="not an extra layout"):
    rb.code_layout_flags(0)
  (build / rb.GUARD_RECORDS).unlink()
  with pytest.raises(ValueError, match="guard_records.json"):
    rb.rebuild_layout(p, src, build, recipe, 3)

def test_stack_shift_moves_the_stack_under_cachegrind(tmp_path):
  """A layout's stack shift lowers the stack by about its size, the same on every run
  (valgrind's stack is not randomized)."""
  src = tmp_path / "where.c"
  src.write_text('#include <stdio.h>\nint main(void) { int x; '
                 'printf("%lu\\n", (unsigned long)&x); return 0; }\n')
  exe = tmp_path / "where"
  subprocess.run([toolchain(22).clang, "-O1", str(src), "-o", str(exe)], check=True)
  where = lambda shift: int(rb.cachegrind(exe, [], tmp_path, tmp_path / "cg.out",
                                          stack_shift=shift)[0])
  base, shifted = where(0), where(3000)
  assert where(3000) == shifted
  assert 2900 <= base - shifted <= 3200


def test_measured_runs_do_not_depend_on_the_callers_environment(tmp_path, small_program):
  """Runs use RUN_ENV, arguments relative to the workload dir and equal-length program
  paths: the caller's environment does not change the counts, and both sides and every
  layout start with the same argument bytes."""
  work = tmp_path / "w"
  inp, script = rp.write_workload(work)
  p, src = rp.prepare_program(small_program, work)
  exe = rb.build_program(p, src, work / p.name / "default", "regalloc_eviction", None,
                         None, jobs=2)
  args = rp.program_args(p, inp, script, relative=True)
  assert args and not any(str(work) in a for a in args)
  counts = []
  for noise in ("", "y" * 3000):
    os.environ["MLGO_TEST_NOISE"] = noise
    try:
      _, ev = rb.cachegrind(rc._run_path(work, p, "default", 0, exe), args, work,
                            work / "cg.out")
    finally:
      del os.environ["MLGO_TEST_NOISE"]
    counts.append(rb.metrics(ev))
  assert counts[0] == counts[1]
  paths = {rc._run_path(work, p, v, i, exe) for v in ("default", "policy") for i in (0, 4)}
  assert len(paths) == 4 and len({len(x) for x in paths}) == 1


def test_a_program_whose_output_follows_the_layout_is_refused(tmp_path, small_program,
                                                              monkeypatch):
  """Fault injection: a program that prints an address gives a different output in
  another layout; runtime_check refuses to report and names the program and build."""
  leaky = rp.Program(
      "leaky", small_program.package, ["{gen}/leaky.c"], [], [], [], None, role="heldout",
      workload="prints where its code is",
      gen_files={"leaky.c": '#include <stdio.h>\nint main(void) { '
                            'printf("%p\\n", (void *)&main); return 0; }\n'})
  monkeypatch.setattr(rp, "PROGRAMS", rp.PROGRAMS + [leaky])
  model = next(p for p in cli.runfile_candidates("models/regalloc_eviction")
               if (p / "policy.json").exists())
  with pytest.raises(RuntimeError, match=r"leaky: the \w+ build's output changes with its "
                                         r"memory layout .*layout-1"):
    rc.run("regalloc_eviction", model, tmp_path / "rc", programs=["leaky"], layouts=1,
           stream=io.StringIO())
