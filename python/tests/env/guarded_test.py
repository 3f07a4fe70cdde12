"""Guarded compiles (mlgo.env.guarded): the tracer plugin's per-function selection, the
better of default and policy per function (regalloc) or per module (inlining), and the
guarded evaluator."""
import csv
import dataclasses
import pathlib
import subprocess

import numpy as np
import pytest

from mlgo import env, evaluation
from mlgo.env import guarded, prepared, tracer
from mlgo.env.policies import ThresholdShift
from mlgo.policy import policy_io
from mlgo.problems import get_problem, regalloc
from mlgo.training.testing import make_tiny_corpus
from mlgo.util.toolchain import toolchain

import envtestlib as lib

FLAGS = ["-O2", "-relocation-model=pic"]
DATA = pathlib.Path(__file__).resolve().parent / "regalloc_programs"


class LowestColumn:
  """Deterministic and stateless (as a guarded compile needs): evicts from the first
  valid column. Worse than the default on some functions of the test programs, better
  on others, so all three compiles of a guarded compile are exercised."""

  def act(self, obs):
    return regalloc.lowest_valid_column(obs)


class SmallFirst:
  """Priority: short live ranges first (the default does the opposite)."""

  def act(self, obs):
    return np.float32(1e6 / (1.0 + float(obs["li_size"].reshape(-1)[0])))


@pytest.fixture(scope="module")
def combined(tmp_path_factory):
  """One module holding every test program's functions (several functions, so some get
  better and some worse under one policy)."""
  d = tmp_path_factory.mktemp("combined")
  src = d / "all.c"
  src.write_text("".join(f'#include "{p}"\n' for p in sorted(DATA.glob("*.c"))))
  bc = d / "all.bc"
  subprocess.run([toolchain(22).clang, "-O2", "-c", "-emit-llvm", str(src), "-o", str(bc)],
                 check=True)
  return env.LlcModule("all", str(bc), FLAGS)


def _scores(m, problem, policy, out=None, flags=()):
  r = env.compile_module(m, problem, policy, output_path=str(out) if out else None,
                         extra_flags=list(flags), timeout=120)
  assert r.ok, r.reason
  return r, dict(r.reward["functions"])


def _listing(tmp_path, names):
  p = tmp_path / "functions.txt"
  p.write_text("".join(n + "\n" for n in names))
  return [f"-load={tracer.plugin_path()}", f"{guarded.POLICY_FUNCTIONS_OPTION}={p}"]


def test_plugin_list_selects_functions(combined, tmp_path):
  """Naming no function gives the default's object without asking the policy; naming
  all of them gives the policy's object, byte for byte."""
  _, dflt = _scores(combined, "regalloc_eviction", env.CompilerDefault(), tmp_path / "d.o")
  r, pol = _scores(combined, "regalloc_eviction", LowestColumn(), tmp_path / "p.o")
  assert r.decisions > 0 and pol != dflt
  none, _ = _scores(combined, "regalloc_eviction", LowestColumn(), tmp_path / "n.o",
                    _listing(tmp_path, []))
  assert none.decisions == 0
  assert (tmp_path / "n.o").read_bytes() == (tmp_path / "d.o").read_bytes()
  every, _ = _scores(combined, "regalloc_eviction", LowestColumn(), tmp_path / "a.o",
                     _listing(tmp_path, sorted(pol)))
  assert every.decisions == r.decisions
  assert (tmp_path / "a.o").read_bytes() == (tmp_path / "p.o").read_bytes()


@pytest.mark.parametrize("problem,policy", [("regalloc_eviction", LowestColumn()),
                                            ("regalloc_priority", SmallFirst()),
                                            # judged by the learned performance model
                                            ("regalloc_eviction_perf", LowestColumn())])
def test_guarded_compile_is_the_lower_cost_per_function(combined, tmp_path, problem, policy):
  _, dflt = _scores(combined, problem, env.CompilerDefault())
  _, pol = _scores(combined, problem, policy)
  better = sorted(f for f in pol if pol[f] < dflt.get(f, 0.0))
  worse = [f for f in pol if pol[f] > dflt.get(f, 0.0)]
  assert better and worse, "the test policy should win some functions and lose others"
  out = tmp_path / "g.o"
  g = guarded.guarded_compile(combined, problem, policy, output_path=str(out))
  assert g.ok and g.compiles == 3 and g.mismatches == []
  assert g.policy_functions == better
  assert g.default_scores == dflt and g.policy_scores == pol
  for f in set(dflt) | set(pol):
    assert g.scores.get(f, 0.0) == pytest.approx(min(dflt.get(f, 0.0), pol.get(f, 0.0)),
                                                 rel=1e-9), f
  assert sum(g.scores.values()) < min(sum(dflt.values()), sum(pol.values()))
  # The object written is the guarded compile's: recompiling with the same list
  # gives the same bytes.
  _scores(combined, problem, policy, tmp_path / "again.o", _listing(tmp_path, better))
  assert out.read_bytes() == (tmp_path / "again.o").read_bytes()
  # With the default's scores given (a cache), one llc run fewer and the same result.
  g2 = guarded.guarded_compile(combined, problem, policy, default_scores=dflt)
  assert g2.compiles == 2 and g2.scores == g.scores


def test_selected_compile_keeps_the_named_functions_whatever_their_cost(combined,
                                                                       tmp_path):
  """policy_functions: exactly the named functions get the policy's allocation, a worse
  one included (the choice was made elsewhere, e.g. by measured run time), every other
  function the default's; naming none gives the default's object."""
  _, dflt = _scores(combined, "regalloc_eviction", env.CompilerDefault(), tmp_path / "d.o")
  _, pol = _scores(combined, "regalloc_eviction", LowestColumn())
  better = sorted(f for f in pol if pol[f] < dflt.get(f, 0.0))
  worse = sorted(f for f in pol if pol[f] > dflt.get(f, 0.0))
  pick = {better[0], worse[0], "not_a_function_of_this_module"}
  g = guarded.guarded_compile(combined, "regalloc_eviction", LowestColumn(),
                              policy_functions=pick, output_path=str(tmp_path / "s.o"))
  assert g.ok and g.compiles == 3 and g.mismatches == []
  assert g.policy_functions == sorted({better[0], worse[0]})
  for f in set(dflt) | set(pol):
    want = pol.get(f, 0.0) if f in pick else dflt.get(f, 0.0)
    assert g.scores.get(f, 0.0) == pytest.approx(want, rel=1e-9), f
  assert g.scores[worse[0]] > dflt[worse[0]]
  none = guarded.guarded_compile(combined, "regalloc_eviction", LowestColumn(),
                                 policy_functions=set(), output_path=str(tmp_path / "n.o"))
  assert none.ok and none.policy_functions == [] and none.scores == dflt
  assert (tmp_path / "n.o").read_bytes() == (tmp_path / "d.o").read_bytes()


def test_routed_compile_gives_each_function_its_policys_allocation(combined, tmp_path):
  """A FunctionRouter over two policies in a selected compile: each named function has
  exactly the score its own policy gives it in a plain compile (the allocator decides
  functions independently), every other function the default's."""
  from mlgo.env.policies import DefaultPolicy, FunctionRouter
  _, dflt = _scores(combined, "regalloc_eviction", env.CompilerDefault())
  _, low = _scores(combined, "regalloc_eviction", LowestColumn())
  _, rule = _scores(combined, "regalloc_eviction", DefaultPolicy("regalloc_eviction"))
  both = sorted(f for f in low if low[f] != rule.get(f, 0.0) and low[f] != dflt.get(f, 0.0))
  assert len(both) >= 2, "the test needs two functions the policies allocate differently"
  route = {both[0]: 0, both[1]: 1}
  g = guarded.guarded_compile(combined, "regalloc_eviction",
                              FunctionRouter([LowestColumn(), DefaultPolicy("regalloc_eviction")],
                                             route),
                              policy_functions=set(route))
  assert g.ok and g.mismatches == [] and g.policy_functions == sorted(route)
  assert g.scores[both[0]] == pytest.approx(low[both[0]], rel=1e-9)
  assert g.scores[both[1]] == pytest.approx(rule.get(both[1], 0.0), rel=1e-9)
  for f in set(dflt) | set(low):
    if f not in route:
      assert g.scores.get(f, 0.0) == pytest.approx(dflt.get(f, 0.0), rel=1e-9), f
  with pytest.raises(ValueError, match="do not exist"):
    FunctionRouter([LowestColumn()], {"f": 1})


def test_per_function_samples_are_the_same_alone_and_routed(combined):
  """PerFunctionSample seeds each function by its name: a sampled allocation of one
  function is the same in a plain compile and when it alone is routed to the sampler."""
  from mlgo.env.policies import FunctionRouter, PerFunctionSample
  p = policy_io.load_policy(lib.shipped_eviction_model())
  sampler = lambda: PerFunctionSample(policy_io.Policy(p.spec, p.arch.w, greedy=False), 5)
  _, dflt = _scores(combined, "regalloc_eviction", env.CompilerDefault())
  _, greedy = _scores(combined, "regalloc_eviction", p)
  _, s1 = _scores(combined, "regalloc_eviction", sampler())
  _, s2 = _scores(combined, "regalloc_eviction", sampler())
  assert s1 == s2 and s1 != greedy
  picked = sorted(f for f in s1 if s1[f] != greedy.get(f, 0.0))[:2]
  assert picked
  g = guarded.guarded_compile(combined, "regalloc_eviction",
                              FunctionRouter([p, sampler()], {f: 1 for f in picked}),
                              policy_functions=set(picked))
  assert g.ok and g.mismatches == []
  for f in picked:
    assert g.scores[f] == pytest.approx(s1[f], rel=1e-9), f
  with pytest.raises(ValueError, match="sampling"):
    PerFunctionSample(p, 1)


def test_lowest_scores_breaks_ties_to_the_default_then_the_earlier():
  route = guarded.lowest_scores({"a": 1.0, "b": 2.0, "c": 3.0},
                                [{"a": 1.0, "b": 1.0, "c": 2.0}, {"a": 1.0, "b": 1.0, "c": 1.0}])
  assert route == {"b": 0, "c": 1}   # "a" ties the default, "b" the earlier
  # A function missing from a compile has no spill code there: cost 0 (missing).
  assert guarded.lowest_scores({"a": 1.0}, [{"a": 2.0}, {}]) == {"a": 1}
  # With spill-code counts, a side whose count is above the default's cannot win:
  # "f"'s cheapest side adds spill code, the next one does not; "g"'s only win adds some.
  counts = ({"f": 5.0, "g": 2.0}, [{"f": 6.0, "g": 3.0}, {"f": 5.0, "g": 2.0}])
  assert guarded.lowest_scores({"f": 10.0, "g": 4.0}, [{"f": 8.0, "g": 1.0},
                                                       {"f": 9.0, "g": 4.0}],
                               counts=counts) == {"f": 1}


def test_guard_over_candidates_is_the_lowest_per_function(combined, tmp_path):
  """candidates: every function gets the lowest score among the default's, the policy's
  and each candidate's allocation (a sampled allocation of the shipped model among
  them), through one routed compile; the object is that compile's."""
  from mlgo.env.policies import DefaultPolicy, FunctionRouter
  p = policy_io.load_policy(lib.shipped_eviction_model())
  cands = guarded.candidate_policies(p, [], 1, "regalloc_eviction")
  cands.insert(0, DefaultPolicy("regalloc_eviction"))
  _, dflt = _scores(combined, "regalloc_eviction", env.CompilerDefault())
  sides = [_scores(combined, "regalloc_eviction", x)[1] for x in [LowestColumn()] + cands]
  out = tmp_path / "g.o"
  g = guarded.guarded_compile(combined, "regalloc_eviction", LowestColumn(),
                              candidates=cands, output_path=str(out))
  assert g.ok and g.mismatches == [] and g.compiles == 5
  assert g.policy_scores == sides[0] and g.candidate_scores == sides[1:]
  keys = set(dflt).union(*sides)
  for f in keys:
    assert g.scores.get(f, 0.0) == pytest.approx(
        min([dflt.get(f, 0.0)] + [s.get(f, 0.0) for s in sides]), rel=1e-9), f
  assert g.route == guarded.lowest_scores(dflt, sides)
  assert {k for k in g.route.values() if k > 0}, "no function went to a candidate"
  assert g.policy_functions == sorted(g.route)
  single = guarded.guarded_compile(combined, "regalloc_eviction", LowestColumn(),
                                   default_scores=dflt)
  assert sum(g.scores.values()) < sum(single.scores.values())
  _scores(combined, "regalloc_eviction", FunctionRouter([LowestColumn()] + cands, g.route),
          tmp_path / "again.o", _listing(tmp_path, sorted(g.route)))
  assert out.read_bytes() == (tmp_path / "again.o").read_bytes()
  with pytest.raises(ValueError, match="candidates go with"):
    guarded.guarded_compile(combined, "regalloc_eviction", LowestColumn(),
                            candidates=cands, policy_functions={"main"})
  with pytest.raises(ValueError, match="candidates go with"):
    guarded.guarded_compile(combined, "inlining", LowestColumn(), candidates=cands)
  with pytest.raises(ValueError, match="is for regalloc_eviction, not regalloc_priority"):
    guarded.candidate_policies(p, [lib.shipped_eviction_model()], 0, "regalloc_priority")


def test_replay_makes_the_guarded_allocation_again_in_one_compile(combined, tmp_path):
  """A guard's record (routed over candidates) replayed: the same object with the same
  flags; with block alignment added (acts after allocation), the same per-function
  remarks costs and a different object. Records of the default's and the policy's own
  object replay to those objects; an unknown kind is refused."""
  p = policy_io.load_policy(lib.shipped_eviction_model())
  cands = guarded.candidate_policies(p, [], 1, "regalloc_eviction")
  out = tmp_path / "g.o"
  g = guarded.guarded_compile(combined, "regalloc_eviction", LowestColumn(),
                              candidates=cands, output_path=str(out))
  assert g.ok and g.object_from == "routed" and any(g.route.values())
  rec = g.record()
  assert rec == {"object_from": "routed", "policy_functions": g.policy_functions,
                 "route": g.route}
  again = tmp_path / "again.o"
  r = guarded.replay_guarded(combined, "regalloc_eviction", LowestColumn(), rec,
                             candidates=cands, output_path=str(again))
  assert r.ok and again.read_bytes() == out.read_bytes()
  aligned = env.LlcModule("all", combined.bc_path, FLAGS + ["-align-all-nofallthru-blocks=3"])
  moved = tmp_path / "moved.o"
  r = guarded.replay_guarded(aligned, "regalloc_eviction", LowestColumn(), rec,
                             candidates=cands, output_path=str(moved))
  assert r.ok and moved.read_bytes() != out.read_bytes()
  assert dict(r.reward["functions"]) == pytest.approx(g.scores, rel=1e-9)
  for kind, policy in (("default", env.CompilerDefault()), ("policy", LowestColumn())):
    own = tmp_path / f"{kind}.o"
    _scores(combined, "regalloc_eviction", policy, own)
    r = guarded.replay_guarded(combined, "regalloc_eviction", LowestColumn(),
                               dict(rec, object_from=kind), candidates=cands,
                               output_path=str(tmp_path / f"{kind}-again.o"))
    assert r.ok and (tmp_path / f"{kind}-again.o").read_bytes() == own.read_bytes()
  with pytest.raises(ValueError, match="object_from 'best'"):
    guarded.replay_guarded(combined, "regalloc_eviction", LowestColumn(),
                           dict(rec, object_from="best"))

def test_no_more_spill_code_keeps_only_wins_that_add_none(combined):
  """no_more_spill_code: a side wins a function only if its frequency-free spill-code
  count is not above the default's; among those, the lowest cost; never a function that
  adds spill code, and never more than the unrestricted guard keeps."""
  p = policy_io.load_policy(lib.shipped_eviction_model())
  cands = guarded.candidate_policies(p, [], 2, "regalloc_eviction")
  free = guarded.guarded_compile(combined, "regalloc_eviction", LowestColumn(),
                                 candidates=cands)
  g = guarded.guarded_compile(combined, "regalloc_eviction", LowestColumn(),
                              candidates=cands, no_more_spill_code=True)
  assert g.ok and g.mismatches == []
  d, _ = _scores(combined, "regalloc_eviction", env.CompilerDefault())
  sides = [_scores(combined, "regalloc_eviction", x)[0] for x in [LowestColumn()] + cands]
  dc = d.reward["spill_code"]
  for f, k in g.route.items():
    assert sides[k].reward["spill_code"].get(f, 0.0) <= dc.get(f, 0.0) + 1e-6, f
  for f in set(g.default_scores):
    ok = [s.reward["functions"].get(f, 0.0) for s in sides
          if s.reward["spill_code"].get(f, 0.0) <= dc.get(f, 0.0) + 1e-6]
    assert g.scores.get(f, 0.0) == pytest.approx(min([g.default_scores[f]] + ok), rel=1e-9), f
  assert sum(free.scores.values()) <= sum(g.scores.values()) <= sum(g.default_scores.values())
  with pytest.raises(ValueError, match="no_more_spill_code goes with"):
    guarded.guarded_compile(combined, "regalloc_eviction", LowestColumn(),
                            no_more_spill_code=True, policy_functions={"main"})


def test_cli_flag_offers_exactly_the_guard_rules():
  """--no_more_spill_code offers exactly the rules guarded_compile takes (one tuple, kept
  in mlgo.util.cli below env), and the bare flag means "function"."""
  import argparse  # pylint: disable=import-outside-toplevel
  from mlgo.util import cli  # pylint: disable=import-outside-toplevel
  ap = argparse.ArgumentParser()
  cli.add_spill_code_flag(ap)
  flag = next(a for a in ap._actions if a.dest == "no_more_spill_code")  # pylint: disable=protected-access
  assert tuple(flag.choices) == guarded.SPILL_CODE_RULES
  assert ap.parse_args([]).no_more_spill_code is None
  assert ap.parse_args(["--no_more_spill_code"]).no_more_spill_code == "function"
  for rule in guarded.SPILL_CODE_RULES:
    value = ap.parse_args([f"--no_more_spill_code={rule}"]).no_more_spill_code
    assert guarded.spill_code_rule(value) == rule


def test_every_guard_problem_of_the_tools_can_guard():
  """The tools' --problem (runtime_check, guarded_cc) offers the regalloc problems and
  their performance-model variants, and every one of them is a per-function guard."""
  import argparse  # pylint: disable=import-outside-toplevel
  from mlgo.util import cli  # pylint: disable=import-outside-toplevel
  ap = argparse.ArgumentParser()
  cli.add_guard_problem_flag(ap)
  assert ap.parse_args([]).problem == "regalloc_eviction"
  for name in cli.GUARD_PROBLEMS:
    assert guarded.check_problem(ap.parse_args([f"--problem={name}"]).problem).key == "function"
  assert {"regalloc_eviction_perf", "regalloc_priority_perf"} <= set(cli.GUARD_PROBLEMS)
  with pytest.raises(SystemExit):
    ap.parse_args(["--problem=inlining_oz"])


def _guards_with_rule(combined, rule):
  """(candidates, the guard without a rule, the guard with `rule`) over the shipped
  model's two sampled allocations; the ruled guard checked for a consistent result."""
  p = policy_io.load_policy(lib.shipped_eviction_model())
  cands = guarded.candidate_policies(p, [], 2, "regalloc_eviction")
  free = guarded.guarded_compile(combined, "regalloc_eviction", LowestColumn(),
                                 candidates=cands)
  g = guarded.guarded_compile(combined, "regalloc_eviction", LowestColumn(),
                              candidates=cands, no_more_spill_code=rule)
  assert g.ok and g.mismatches == [] and g.compiles == 2 + len(cands) + (1 if g.route else 0)
  return cands, free, g


def _check_lowest_allowed(g, free, allowed):
  """Every routed function went to a side `allowed(k, f)` lets win it, and every
  function got the lowest score among the default's and the allowed sides'; the ruled
  guard keeps no more than the unruled one."""
  all_scores = [g.policy_scores] + g.candidate_scores
  for f, k in g.route.items():
    assert allowed(k, f), f
  for f in set(g.default_scores):
    ok = [sc.get(f, 0.0) for k, sc in enumerate(all_scores) if allowed(k, f)]
    assert g.scores.get(f, 0.0) == pytest.approx(min([g.default_scores[f]] + ok), rel=1e-9), f
  assert sum(free.scores.values()) <= sum(g.scores.values()) <= sum(g.default_scores.values())


def test_no_more_spill_code_in_loops(combined, tmp_path, monkeypatch):
  """no_more_spill_code="loops": a side wins a function only if, at every loop depth, the
  spill code its object has in loops that deep is not above the default's object's;
  among those, the lowest cost."""
  from mlgo.profiles import loops
  cands, free, g = _guards_with_rule(combined, "loops")
  objs = []
  for i, x in enumerate([env.CompilerDefault(), LowestColumn()] + cands):
    _scores(combined, "regalloc_eviction", x, tmp_path / f"{i}.o")
    objs.append(loops.spill_code_in_loops(str(tmp_path / f"{i}.o")))
  dflt, sides = objs[0], objs[1:]

  def allowed(k, f):
    return all(n <= dflt.get(f, {}).get(d, 0) for d, n in sides[k].get(f, {}).items())
  _check_lowest_allowed(g, free, allowed)
  # Every allocation but the default's read as one spill more than the default's in
  # each of its loop levels: no function with a loop can leave the default any more.
  real = guarded.loops_lib.spill_code_in_loops

  def one_more(obj):
    if obj.endswith("default.o"):
      return real(obj)
    return {f: {d: n + 1 for d, n in c.items()}
            for f, c in real(str(pathlib.Path(obj).with_name("default.o"))).items()}
  monkeypatch.setattr(guarded.loops_lib, "spill_code_in_loops", one_more)
  with_loops = {f for f, c in dflt.items() if c}
  assert with_loops & set(free.route), "the unrestricted guard took no function with a loop"
  blocked = guarded.guarded_compile(combined, "regalloc_eviction", LowestColumn(),
                                    candidates=cands, no_more_spill_code="loops")
  assert blocked.ok and not with_loops & set(blocked.route)
  with pytest.raises(ValueError, match="'hot' is not one of function, loops, perf"):
    guarded.guarded_compile(combined, "regalloc_eviction", LowestColumn(),
                            no_more_spill_code="hot")


def test_no_more_estimated_cycles(combined, tmp_path, monkeypatch):
  """no_more_spill_code="perf": a side wins a function only if the learned performance
  model, reading that side's object (with llc's block address map), does not estimate
  the function slower than in the default's object; among those, the lowest remarks
  cost. A missing cost model stops the guard with its path."""
  from mlgo.profiles import bbmap
  cands, free, g = _guards_with_rule(combined, "perf")
  cycles = []
  for i, x in enumerate([env.CompilerDefault(), LowestColumn()] + cands):
    _scores(combined, "regalloc_eviction", x, tmp_path / f"{i}.o", bbmap.FLAGS_LLC)
    cycles.append(regalloc.perf_reward({"object": str(tmp_path / f"{i}.o")})["functions"])
  dflt, sides = cycles[0], cycles[1:]
  assert any(v > 0 for v in dflt.values())

  def allowed(k, f):
    return sides[k].get(f, 0.0) <= dflt.get(f, 0.0) * (1 + 1e-6) + 1e-6
  _check_lowest_allowed(g, free, allowed)
  # Every allocation but the default's estimated one cycle slower per call in every
  # function: nothing may leave the default.
  real = regalloc.perf_reward

  def slower(outputs):
    obj = outputs["object"]
    if obj.endswith("default.o"):
      return real(outputs)
    base = real({"object": str(pathlib.Path(obj).with_name("default.o"))})
    return {"functions": {f: c + 1.0 for f, c in base["functions"].items()}}
  monkeypatch.setattr(guarded.regalloc_problems, "perf_reward", slower)
  assert free.route, "the unrestricted guard took no function"
  blocked = guarded.guarded_compile(combined, "regalloc_eviction", LowestColumn(),
                                    candidates=cands, no_more_spill_code="perf")
  assert blocked.ok and blocked.route == {} and blocked.scores == blocked.default_scores
  monkeypatch.setenv("MLGO_PERF_MODEL", str(tmp_path / "no_model.json"))
  with pytest.raises(ValueError, match="no_model.json: not a cost model"):
    guarded.guarded_compile(combined, "regalloc_eviction", LowestColumn(),
                            no_more_spill_code="perf")


def test_no_more_spill_code_under_any_trip_count_error(combined, tmp_path, monkeypatch):
  """no_more_spill_code="robust": a side wins a function only if its spill code weighted
  by llc's block frequencies (read from its object) is not above the default's at any
  corner of the trip-count errors guarded.ROBUST_FACTOR allows; among those, the lowest
  remarks cost."""
  from mlgo.profiles import bbmap, loops
  cands, free, g = _guards_with_rule(combined, "robust")
  corners = []
  for i, x in enumerate([env.CompilerDefault(), LowestColumn()] + cands):
    _scores(combined, "regalloc_eviction", x, tmp_path / f"{i}.o", bbmap.FLAGS_LLC)
    corners.append({f: loops.worst_case_costs(c, guarded.ROBUST_FACTOR) for f, c in
                    loops.spill_cost_by_depth(str(tmp_path / f"{i}.o")).items()})
  dflt, sides = corners[0], corners[1:]
  assert any(any(c) for c in dflt.values())

  def allowed(k, f):
    d = dflt.get(f, [])
    return all(x <= d[j] + 1e-6 * max(1.0, d[j]) for j, x in enumerate(sides[k].get(f, [])))
  _check_lowest_allowed(g, free, allowed)
  # Every allocation but the default's read as one more weighted spill inside a loop
  # than the default's: no function can leave the default any more.
  real = guarded.loops_lib.spill_cost_by_depth

  def one_more(obj):
    if obj.endswith("default.o"):
      return real(obj)
    return {f: [c[0], c[1] + 1.0] + c[2:]
            for f, c in real(str(pathlib.Path(obj).with_name("default.o"))).items()}
  monkeypatch.setattr(guarded.loops_lib, "spill_cost_by_depth", one_more)
  assert free.route, "the unrestricted guard took no function"
  blocked = guarded.guarded_compile(combined, "regalloc_eviction", LowestColumn(),
                                    candidates=cands, no_more_spill_code="robust")
  assert blocked.ok and blocked.route == {} and blocked.scores == blocked.default_scores


def test_no_spill_code_traded_between_loop_levels(combined, monkeypatch):
  """no_more_spill_code="trades": read as more spill code than the default's in the
  outer loop and less in the inner one, no allocation may win any function; read as more
  at every depth, the remarks cost alone decides (the unruled guard's choice)."""
  cands, free, g = _guards_with_rule(combined, "trades")
  assert free.route, "the unrestricted guard took no function"
  assert set(g.route) <= set(free.route)

  real = guarded.loops_lib.spill_code_in_loops

  def reading(default, other):
    def read(obj):
      return {f: dict(default if obj.endswith("default.o") else other) for f in real(obj)}
    return read
  outer, inner = {"loop_depth_1": 2, "loop_depth_2": 1}, {"loop_depth_1": 3, "loop_depth_2": 0}
  monkeypatch.setattr(guarded.loops_lib, "spill_code_in_loops", reading(outer, inner))
  traded = guarded.guarded_compile(combined, "regalloc_eviction", LowestColumn(),
                                   candidates=cands, no_more_spill_code="trades")
  assert traded.ok and traded.route == {} and traded.scores == traded.default_scores
  more = {"loop_depth_1": 5, "loop_depth_2": 2}
  monkeypatch.setattr(guarded.loops_lib, "spill_code_in_loops", reading(outer, more))
  untraded = guarded.guarded_compile(combined, "regalloc_eviction", LowestColumn(),
                                     candidates=cands, no_more_spill_code="trades")
  assert untraded.ok and untraded.route == free.route


def test_lowest_scores_refuses_only_trades_between_loop_levels():
  """A side with more spill code at depth 1 and less at depth 2 than the default's (the
  counts are at depth >= D) cannot win; more at both depths, or more only deeper, can."""
  dflt = {"f": {"loop_depth_1": 24, "loop_depth_2": 2}}
  moved_out = {"f": {"loop_depth_1": 29, "loop_depth_2": 1}}   # depth 1: 28 vs 22; 2: 1 vs 2
  more_everywhere = {"f": {"loop_depth_1": 30, "loop_depth_2": 3}}
  more_deeper = {"f": {"loop_depth_1": 24, "loop_depth_2": 4}}  # depth 1: 20 vs 22
  scores = [{"f": 1.0}]
  for side, wins in ((moved_out, False), (more_everywhere, True), (more_deeper, True)):
    got = guarded.lowest_scores({"f": 9.0}, scores, counts=(dflt, [side]),
                                vetoed=guarded._trades)  # pylint: disable=protected-access
    assert got == ({"f": 0} if wins else {}), side


def test_lowest_scores_with_loop_counts():
  """Dict counts: a side wins only if no entry is above the default's (a missing entry
  is 0): spill code moved from depth 2 to depth 1 is allowed, into a loop is not."""
  dflt = {"f": {"loop_depth_1": 4, "loop_depth_2": 2}, "g": {}}
  moved_out = {"f": {"loop_depth_1": 4, "loop_depth_2": 1}, "g": {}}
  into_loop = {"f": {"loop_depth_1": 5, "loop_depth_2": 0}, "g": {"loop_depth_1": 1}}
  scores = [{"f": 3.0, "g": 1.0}, {"f": 2.0, "g": 0.5}]
  assert guarded.lowest_scores({"f": 9.0, "g": 2.0}, scores,
                               counts=(dflt, [moved_out, into_loop])) == {"f": 0, "g": 0}
  assert guarded.lowest_scores({"f": 9.0, "g": 2.0}, scores,
                               counts=(dflt, [into_loop, into_loop])) == {}


def test_policy_better_everywhere_keeps_its_compile(tmp_path):
  m = None
  for src in sorted(DATA.glob("*.c")):
    bc = tmp_path / (src.stem + ".bc")
    subprocess.run([toolchain(22).clang, "-O2", "-c", "-emit-llvm", str(src), "-o", str(bc)],
                   check=True)
    m = env.LlcModule(src.stem, str(bc), FLAGS)
    _, dflt = _scores(m, "regalloc_eviction", env.CompilerDefault())
    _, pol = _scores(m, "regalloc_eviction", LowestColumn())
    g = guarded.guarded_compile(m, "regalloc_eviction", LowestColumn(), default_scores=dflt)
    assert g.mismatches == []
    if all(pol[f] <= dflt.get(f, 0.0) for f in pol):
      assert g.compiles == 1 and g.scores == pol          # nothing to undo
    elif not any(pol[f] < dflt.get(f, 0.0) for f in pol):
      assert g.compiles == 2 and g.policy_functions == [] and g.scores == dflt


def test_unreadable_function_list_fails_naming_it(combined, tmp_path):
  missing = tmp_path / "no_such_list.txt"
  r = env.compile_module(combined, "regalloc_eviction", LowestColumn(), timeout=120,
                         extra_flags=[f"-load={tracer.plugin_path()}",
                                      f"{guarded.POLICY_FUNCTIONS_OPTION}={missing}"])
  assert not r.ok
  assert str(missing) in (r.reason or "") + (r.stderr or "")


def test_per_function_guard_needs_the_tracer():
  untraced = dataclasses.replace(get_problem("regalloc_eviction"), name="untraced",
                                 tracer=None)
  with pytest.raises(ValueError, match="untraced: .*tracer plugin"):
    guarded.check_problem(untraced)
  assert guarded.check_problem("inlining").key == "module"   # guarded per module


@pytest.mark.parametrize("delta", [-50, 50])
def test_inlining_guard_keeps_the_smaller_module(tmp_path, delta):
  """Inlining is guarded per module: the policy's object unless it is bigger."""
  m = env.module_from_source(lib.program("calls.c"), str(tmp_path), opt="Oz")
  d = env.compile_module(m, "inlining", env.CompilerDefault(), output_path=str(tmp_path / "d.o"))
  pol = ThresholdShift(delta)
  p = env.compile_module(m, "inlining", pol, output_path=str(tmp_path / "p.o"))
  ds, ps = d.reward["text_size"], p.reward["text_size"]
  assert d.ok and p.ok and ds != ps, "the test policy should change the size"
  g = guarded.guarded_compile(m, "inlining", pol, output_path=str(tmp_path / "g.o"))
  assert g.ok and g.mismatches == [] and g.scores == {"": min(ds, ps)}
  assert g.policy_functions == ([""] if ps <= ds else [])
  want = tmp_path / ("p.o" if ps <= ds else "d.o")
  assert (tmp_path / "g.o").read_bytes() == want.read_bytes()


def test_guarded_evaluation(tmp_path):
  """evaluate(guarded=True) with a real policy dir: the shipped eviction model with its
  output layer negated (a deterministic policy that loses on some functions)."""
  corpus = make_tiny_corpus(tmp_path / "corpus", sorted(DATA.glob("*.c")), opt="O2",
                            variants=2)
  prep = prepared.prepare(corpus, out_root=tmp_path / "prepared")
  shipped = policy_io.load_policy(lib.shipped_eviction_model())
  w = dict(shipped.arch.w)
  w["out/kernel"] = -w["out/kernel"]
  policy_io.write_policy_dir(tmp_path / "anti", shipped.spec, w, saved_model=False)
  plain = evaluation.evaluate("regalloc_eviction", prep, tmp_path / "anti", tmp_path / "e1",
                              split="all", use_cache=False)
  g = evaluation.evaluate("regalloc_eviction", prep, tmp_path / "anti", tmp_path / "e2",
                          split="all", use_cache=False, guarded=True,
                          plain_output=tmp_path / "e2plain")
  assert plain["regressions"] > 0
  assert g["regressions"] == 0 and g["guarded"]["mismatches"] == []
  assert g["default"] == pytest.approx(plain["default"])
  assert g["policy_score"] <= g["default"] and g["policy_score"] <= plain["policy_score"]
  assert g["improvements"] == plain["improvements"]
  assert g["guarded"]["compiles"] >= g["modules"]
  # The plain evaluation from the guarded pass is the separate plain evaluation's.
  both = g["plain"]
  for k in ("modules", "keys", "default", "policy_score", "regressions", "improvements",
            "decisions", "line"):
    assert both[k] == plain[k], k
  assert "guarded" not in both and "(guarded)" not in both["policy"]
  rows = lambda d: sorted((r["key"], r["default"], r["policy"]) for r in
                          csv.DictReader(open(d / "per_key.csv")))
  assert rows(tmp_path / "e2plain") == rows(tmp_path / "e1")
  assert (tmp_path / "e2plain" / "summary.json").exists()
  # More allocations to choose from: never above the one-policy guard, none regressed,
  # every function at the lowest score, the counts per candidate adding up.
  c = evaluation.evaluate("regalloc_eviction", prep, tmp_path / "anti", tmp_path / "e4",
                          split="all", use_cache=False, guarded=True,
                          candidates=[lib.shipped_eviction_model()], samples=1)
  assert c["regressions"] == 0 and c["guarded"]["mismatches"] == []
  assert c["policy_score"] <= g["policy_score"] + 1e-6 * g["default"]
  per = c["guarded"]["per_candidate"]
  assert len(per) == 3 and sum(per) == c["guarded"]["policy_functions"] and per[1] > 0
  with pytest.raises(ValueError, match="go with guarded"):
    evaluation.evaluate("regalloc_eviction", prep, tmp_path / "anti", tmp_path / "e3",
                        split="all", plain_output=tmp_path / "e3plain")
