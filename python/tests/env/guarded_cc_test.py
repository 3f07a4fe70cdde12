"""tools/guarded_cc: a compiler wrapper whose objects are guarded regalloc compiles.

A three-file program (the regalloc test programs plus a main) is built with the wrapper
as a build system would call it (-MMD dependency files, separate link), and with plain
clang; both executables print the same; the wrapper's objects are clang's where the
policy won nothing and cheaper where it won."""
import json
import pathlib
import subprocess

import pytest

from mlgo.util.toolchain import toolchain

import envtestlib as lib

DATA = pathlib.Path(__file__).resolve().parent / "regalloc_programs"
MAIN = r"""
#include <stdint.h>
#include <stdio.h>
uint64_t mixer(uint64_t *a, int n, uint64_t s);
int table(int *t, int n, int k);
double weight(int i) { return 1.0 / (1 + i); }
int main(void) {
  static uint64_t a[4096]; static int t[4096];
  for (int i = 0; i < 4096; i++) { a[i] = i * 2654435761u; t[i] = i * 7 % 13; }
  uint64_t m = mixer(a, 4096, 42);
  int k = table(t, 4096, 5);
  printf("%llu %d\n", (unsigned long long)m, k);
  return 0;
}
"""


def tool():
  return str(lib.runfile("tools/guarded_cc"))


def model():
  return lib.shipped_eviction_model()


@pytest.fixture()
def srcs(tmp_path):
  (tmp_path / "main.c").write_text(MAIN)
  for name in ("mixer.c", "stencil.c"):
    (tmp_path / name).write_text((DATA / name).read_text())
  return ["main.c", "mixer.c", "stencil.c"]


def _build(tmp_path, srcs, cc, tag):
  objs = []
  for s in srcs:
    obj = f"{tag}-{s[:-2]}.o"
    r = subprocess.run(cc + ["-O2", "-fPIE", "-MMD", "-MF", f"{obj}.d", "-c", s, "-o", obj],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / f"{obj}.d").read_text().startswith(f"{obj}:")
    objs.append(obj)
  r = subprocess.run(cc + ["-pie", "-o", tag] + objs, cwd=tmp_path, capture_output=True,
                     text=True, timeout=120)
  assert r.returncode == 0, r.stderr
  out = subprocess.run([str(tmp_path / tag)], capture_output=True, text=True, timeout=60)
  assert out.returncode == 0
  return out.stdout, {s: (tmp_path / o).read_bytes() for s, o in zip(srcs, objs)}


def test_guarded_build_runs_like_clangs(tmp_path, srcs):
  log = tmp_path / "guard.jsonl"
  want, plain = _build(tmp_path, srcs, [toolchain(22).clang], "plain")
  got, guarded = _build(tmp_path, srcs, [tool(), f"--policy={model()}", f"--log={log}",
                                         "--"], "guarded")
  assert got == want and got.strip()
  rows = {r["source"]: r for r in map(json.loads, log.read_text().splitlines())}
  assert set(rows) == set(srcs)
  for s, r in rows.items():
    assert r["ok"] and r["guarded_cost"] <= min(r["default_cost"], r["policy_cost"]) + 1e-6
    if r["policy_functions"]:
      assert r["guarded_cost"] < r["default_cost"] and guarded[s] != plain[s], s
    else:
      assert guarded[s] == plain[s], s   # llc with clang's flags reproduces clang
  assert any(r["policy_functions"] for r in rows.values())


def test_compile_errors_and_passthrough(tmp_path):
  (tmp_path / "bad.c").write_text("int f( { return 0; }\n")
  r = subprocess.run([tool(), f"--policy={model()}", "--", "-c", "bad.c", "-o", "bad.o"],
                     cwd=tmp_path, capture_output=True, text=True, timeout=120)
  assert r.returncode != 0 and "bad.c" in r.stderr and not (tmp_path / "bad.o").exists()
  (tmp_path / "p.c").write_text("int x;\n")
  r = subprocess.run([tool(), f"--policy={model()}", "--", "-E", "p.c"], cwd=tmp_path,
                     capture_output=True, text=True, timeout=120)
  assert r.returncode == 0 and "int x;" in r.stdout


def test_lto_and_joined_output(tmp_path, srcs):
  """-flto objects are bitcode (allocation happens at link time): passed through.
  A joined -oFILE is the output the guarded object replaces."""
  log = tmp_path / "l.jsonl"
  base = [tool(), f"--policy={model()}", f"--log={log}", "--", "-O2", "-c", "mixer.c"]
  r = subprocess.run(base + ["-flto", "-o", "lto.o"], cwd=tmp_path, capture_output=True,
                     text=True, timeout=120)
  assert r.returncode == 0, r.stderr
  assert (tmp_path / "lto.o").read_bytes()[:2] == b"BC" and not log.exists()
  r = subprocess.run(base + ["-ojoined.o"], cwd=tmp_path, capture_output=True, text=True,
                     timeout=300)
  assert r.returncode == 0, r.stderr
  (row,) = map(json.loads, log.read_text().splitlines())
  assert row["ok"] and row["output"] == "joined.o" and not (tmp_path / "mixer.o").exists()


def test_bad_policy_dir_is_a_clear_error(tmp_path):
  r = subprocess.run([tool(), f"--policy={tmp_path / 'nope'}", "--", "-c", "x.c"],
                     cwd=tmp_path, capture_output=True, text=True, timeout=60)
  assert r.returncode == 2 and "nope" in r.stderr and "policy.json" in r.stderr


def test_a_failing_guard_keeps_clangs_object(tmp_path, srcs):
  """A release llc that cannot run: the wrapper warns, keeps clang's object, exits 0."""
  fake = tmp_path / "llc-broken"
  fake.write_text("#!/bin/sh\necho broken llc >&2\nexit 3\n")
  fake.chmod(0o755)
  r = subprocess.run([tool(), "--policy=release", f"--llc={fake}", "--", "-O2", "-c",
                      "mixer.c", "-o", "m.o"], cwd=tmp_path, capture_output=True, text=True,
                     timeout=120)
  assert r.returncode == 0 and "mixer.c: kept clang's object" in r.stderr
  subprocess.run([toolchain(22).clang, "-O2", "-c", "mixer.c", "-o", "ref.o"], cwd=tmp_path,
                 check=True)
  assert (tmp_path / "m.o").read_bytes() == (tmp_path / "ref.o").read_bytes()


def test_unguarded_keeps_the_policys_object(tmp_path, srcs):
  """--unguarded: the object is the plain policy compile's (what the guard compares
  against), so it differs from the guarded object where the policy lost a function."""
  log = tmp_path / "u.jsonl"
  (tmp_path / "both.c").write_text("".join((DATA / n).read_text()
                                           for n in ("mixer.c", "parse.c", "stencil.c")))
  outs = {}
  for mode in ("--unguarded", None):
    args = [tool(), f"--policy={model()}", f"--log={log}"] + ([mode] if mode else [])
    r = subprocess.run(args + ["--", "-O2", "-c", "both.c", "-o", f"{mode or 'g'}.o"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    outs[mode] = (tmp_path / f"{mode or 'g'}.o").read_bytes()
  unguarded, guarded = map(json.loads, log.read_text().splitlines())
  assert unguarded["unguarded"] and "unguarded" not in guarded
  assert unguarded["policy_cost"] == guarded["policy_cost"]
  assert (outs["--unguarded"] == outs[None]) == (
      guarded["guarded_cost"] == guarded["policy_cost"])


def test_inline_plugin_object_is_never_bigger(tmp_path):
  """--inline_plugin: per object the smaller .text of clang -Oz and clang -Oz with the
  shipped inliner's plugin, on the default corpus programs of the tests."""
  from mlgo.util.toolchain import text_size
  plugin = lib.runfile("cc/inline_plugin/plugin_inlining_oz.so")
  log = tmp_path / "inl.jsonl"
  for src in ("calls.c", "pressure.c"):
    (tmp_path / src).write_text(pathlib.Path(lib.program(src)).read_text())
    r = subprocess.run([tool(), f"--inline_plugin={plugin}", f"--log={log}", "--", "-Oz",
                        "-c", src, "-o", f"{src}.o"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    for flags, name in (([], "d"), ([f"-fpass-plugin={plugin}"], "p")):
      subprocess.run([toolchain(22).clang, "-Oz", "-c", src, "-o", f"{src}.{name}.o"] + flags,
                     cwd=tmp_path, check=True)
    d, p = (text_size(str(tmp_path / f"{src}.{n}.o")) for n in ("d", "p"))
    row = json.loads(log.read_text().splitlines()[-1])
    assert (row["default_text"], row["policy_text"]) == (d, p)
    assert text_size(str(tmp_path / f"{src}.o")) == row["guarded_text"] == min(d, p)
    assert row["kept"] == ("policy" if p < d else "default")


def _cachegrind(tmp_path, exe, out):
  r = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--branch-sim=yes",
                      "--demangle=no", f"--cachegrind-out-file={out}", str(exe)],
                     cwd=tmp_path, capture_output=True, text=True, timeout=300)
  assert r.returncode == 0, r.stderr[-500:]
  return r.stdout


def test_selection_by_measured_profiles(tmp_path, srcs):
  """The measured-guard flow of the README: clang's build and the policy's own build
  profiled on one workload, tools/select_functions lists the functions the policy ran
  faster, and guarded_cc --policy_functions gives exactly those the policy's allocation:
  an empty list gives clang's objects byte for byte."""
  plain, clang_objs = _build(tmp_path, srcs, [toolchain(22).clang], "clang")
  pol, _ = _build(tmp_path, srcs, [tool(), "--unguarded", f"--policy={model()}", "--"],
                  "policy")
  assert pol == plain
  assert _cachegrind(tmp_path, tmp_path / "clang", tmp_path / "cg.d") == plain
  _cachegrind(tmp_path, tmp_path / "policy", tmp_path / "cg.p")
  sel = tmp_path / "functions.txt"
  r = subprocess.run([str(lib.runfile("tools/select_functions")), f"--default={tmp_path}/cg.d",
                      f"--policy={tmp_path}/cg.p", f"--output={sel}"], capture_output=True,
                     text=True, timeout=120)
  assert r.returncode == 0, r.stderr
  chosen = sel.read_text().split()
  assert f"select_functions: {len(chosen)} of " in r.stdout
  log = tmp_path / "sel.jsonl"
  out, _ = _build(tmp_path, srcs, [tool(), f"--policy={model()}", f"--log={log}",
                                   f"--policy_functions={sel}", "--"], "selected")
  assert out == plain
  rows = [json.loads(x) for x in log.read_text().splitlines()]
  assert all(x["ok"] for x in rows)
  kept = {f for x in rows for f in x["policy_functions"]}
  assert kept <= set(chosen)
  (tmp_path / "none.txt").write_text("")
  _, objs = _build(tmp_path, srcs, [tool(), f"--policy={model()}",
                                    f"--policy_functions={tmp_path}/none.txt", "--"], "none")
  assert objs == clang_objs
  # A profile with demangled names would match no symbol: refused, naming the file.
  (tmp_path / "cg.bad").write_text((tmp_path / "cg.p").read_text().replace(
      "fn=main", "fn=ns::f(int)", 1))
  r = subprocess.run([str(lib.runfile("tools/select_functions")), f"--default={tmp_path}/cg.d",
                      f"--policy={tmp_path}/cg.bad", f"--output={sel}"], capture_output=True,
                     text=True, timeout=120)
  assert r.returncode == 1 and "cg.bad" in r.stderr and "--demangle=no" in r.stderr
  r = subprocess.run([tool(), f"--policy={model()}", f"--policy_functions={tmp_path}/nope",
                      "--", "-O2", "-c", "main.c", "-o", "x.o"], cwd=tmp_path,
                     capture_output=True, text=True, timeout=120)
  assert r.returncode == 2 and "nope" in r.stderr
  # Two policies: select_functions writes `NAME INDEX`, guarded_cc routes by it.
  wide = lib.runfile("models/regalloc_eviction_wide", "policy.json")
  out, _ = _build(tmp_path, srcs, [tool(), "--unguarded", f"--policy={wide}", "--"], "wide")
  assert out == plain
  _cachegrind(tmp_path, tmp_path / "wide", tmp_path / "cg.w")
  r = subprocess.run([str(lib.runfile("tools/select_functions")), f"--default={tmp_path}/cg.d",
                      f"--policy={tmp_path}/cg.p", f"--policy={tmp_path}/cg.w",
                      f"--output={sel}"], capture_output=True, text=True, timeout=120)
  assert r.returncode == 0, r.stderr
  lines = [x.split() for x in sel.read_text().splitlines()]
  assert lines and all(len(x) == 2 and x[1] in ("0", "1") for x in lines)
  log2 = tmp_path / "two.jsonl"
  out, _ = _build(tmp_path, srcs, [tool(), f"--policy={model()}", f"--candidates={wide}",
                                   f"--log={log2}", f"--policy_functions={sel}", "--"], "two")
  assert out == plain
  rows = [json.loads(x) for x in log2.read_text().splitlines()]
  assert all(x["ok"] for x in rows)
  assert {f for x in rows for f in x["policy_functions"]} <= {x[0] for x in lines}
  (tmp_path / "bad.txt").write_text("f 1\ng two\n")
  r = subprocess.run([tool(), f"--policy={model()}", f"--candidates={wide}",
                      f"--policy_functions={tmp_path}/bad.txt", "--", "-O2", "-c", "main.c",
                      "-o", "x.o"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
  assert r.returncode == 2 and "bad.txt:2" in r.stderr
  (tmp_path / "far.txt").write_text("f 2\n")
  r = subprocess.run([tool(), f"--policy={model()}", f"--candidates={wide}",
                      f"--policy_functions={tmp_path}/far.txt", "--", "-O2", "-c", "main.c",
                      "-o", "x.o"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
  assert r.returncode == 2 and "beyond" in r.stderr


def test_sampled_candidate_builds_are_reproducible(tmp_path, srcs):
  """--unguarded --samples=k builds the k-th sampled allocation, the same every build
  (each function sampled with its own seed), and a route to it (`NAME 1` with
  --samples=1) gives that function the sample's allocation."""
  _, objs1 = _build(tmp_path, srcs, [tool(), "--unguarded", "--samples=1",
                                      f"--policy={model()}", "--"], "s1")
  _, objs1b = _build(tmp_path, srcs, [tool(), "--unguarded", "--samples=1",
                                      f"--policy={model()}", "--"], "s1b")
  _, greedy = _build(tmp_path, srcs, [tool(), "--unguarded", f"--policy={model()}", "--"], "g")
  _, clang = _build(tmp_path, srcs, [toolchain(22).clang], "c")
  assert objs1 == objs1b and objs1 != greedy
  (tmp_path / "none.txt").write_text("")
  _, routed = _build(tmp_path, srcs, [tool(), "--samples=1", f"--policy={model()}",
                                      f"--policy_functions={tmp_path}/none.txt", "--"], "r")
  assert routed == clang


def test_static_guard_over_candidates(tmp_path, srcs):
  """Without --policy_functions, --candidates and --samples widen the cost comparison:
  every object is at most the one-policy guard's cost, the program still runs like
  clang's, and the log says which allocation each chosen function got."""
  wide = lib.runfile("models/regalloc_eviction_wide", "policy.json")
  want, _ = _build(tmp_path, srcs, [toolchain(22).clang], "c")
  one, many = tmp_path / "one.jsonl", tmp_path / "many.jsonl"
  _build(tmp_path, srcs, [tool(), f"--policy={model()}", f"--log={one}", "--"], "one")
  got, _ = _build(tmp_path, srcs, [tool(), f"--policy={model()}", f"--candidates={wide}",
                                   "--samples=2", f"--log={many}", "--"], "many")
  assert got == want
  rows = lambda f: {r["source"]: r for r in map(json.loads, f.read_text().splitlines())}
  r1, rn = rows(one), rows(many)
  assert set(rn) == set(srcs)
  for s, r in rn.items():
    assert r["ok"] and r["guarded_cost"] <= r1[s]["guarded_cost"] + 1e-6, s
    assert r["default_cost"] == pytest.approx(r1[s]["default_cost"])
    assert sorted(r.get("route", {})) == r["policy_functions"]
    assert all(0 <= k <= 3 for k in r.get("route", {}).values())
  assert any(k > 0 for r in rn.values() for k in r.get("route", {}).values())
  # --no_more_spill_code (either count): a subset of the wins, so between clang's cost
  # and the unrestricted guard's.
  for flag in ("--no_more_spill_code", "--no_more_spill_code=loops"):
    rule = tmp_path / f"rule{len(flag)}.jsonl"
    got, _ = _build(tmp_path, srcs, [tool(), f"--policy={model()}", f"--candidates={wide}",
                                     "--samples=2", flag, f"--log={rule}", "--"],
                    f"rule{len(flag)}")
    assert got == want, flag
    for s, r in rows(rule).items():
      assert r["ok"] and r["guarded_cost"] <= r["default_cost"] + 1e-6, (flag, s)
      assert r["guarded_cost"] >= rn[s]["guarded_cost"] - 1e-6, (flag, s)
  for bad in (["--unguarded", f"--candidates={wide}"], ["--samples=-1"],
              ["--no_more_spill_code", "--unguarded"]):
    r = subprocess.run([tool(), f"--policy={model()}"] + bad + ["--", "-O2", "-c", "main.c",
                        "-o", "x.o"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and "guarded_cc:" in r.stderr, bad


def test_guard_judged_by_the_performance_model(tmp_path, srcs):
  """--problem=regalloc_eviction_perf: the same wrapper, each function judged by the
  learned performance model's estimated cycles per call instead of the remarks cost;
  the program still runs like clang's and no object is costlier than clang's by it."""
  want, _ = _build(tmp_path, srcs, [toolchain(22).clang], "c")
  remarks, perf = tmp_path / "remarks.jsonl", tmp_path / "perf.jsonl"
  _build(tmp_path, srcs, [tool(), f"--policy={model()}", f"--log={remarks}", "--"], "r")
  got, _ = _build(tmp_path, srcs, [tool(), "--problem=regalloc_eviction_perf",
                                   f"--policy={model()}", f"--log={perf}", "--"], "p")
  assert got == want
  rows = lambda f: {r["source"]: r for r in map(json.loads, f.read_text().splitlines())}
  rr, rp = rows(remarks), rows(perf)
  assert set(rp) == set(srcs)
  for s, r in rp.items():
    assert r["ok"] and r["guarded_cost"] <= min(r["default_cost"], r["policy_cost"]) + 1e-6, s
    # Another judge: clang's own allocation costs something else in estimated cycles.
    assert r["default_cost"] != pytest.approx(rr[s]["default_cost"]), s
