"""A fourth problem from one problem file and one gin file, kept outside the package
(new_problem/inline_few.py and .gin, copied to a temp dir on $MLGO_PROBLEMS_PATH): the
registry finds it, README command 1's pipeline runs it from the command line (default
trace -> behavioral cloning -> one tf-agents PPO iteration -> held-out evaluation) on a
tiny real corpus, and evaluate takes its policy like any other. A problem file that
cannot be used is refused with its path."""
import json
import pathlib
import re
import shutil

import pytest

from mlgo import evaluation, problems
from mlgo.policy import policy_io
from mlgo.training import cli, dataset, testing

HERE = pathlib.Path(__file__).parent
PROGRAMS = sorted((HERE / "programs").glob("*.c*"))
TOY = HERE / "new_problem"
SEEN = ["cost_estimate", "threshold", "callee_basic_block_count", "callsite_height",
        "caller_users"]


@pytest.fixture
def problem_dir(tmp_path, monkeypatch):
  d = tmp_path / "problems"
  d.mkdir()
  for f in ("inline_few.py", "inline_few.gin"):
    shutil.copy(TOY / f, d / f)
  monkeypatch.setenv(problems.PATH_VARIABLE, str(d))
  return d


def test_a_problem_file_and_a_gin_file_train_end_to_end(problem_dir, tmp_path, capsys):
  assert problems.problem_names()[-1] == "inline_few"
  assert problems.gin_file("inline_few") == problem_dir / "inline_few.gin"
  assert problems.get_problem("inline_few").feature_names == SEEN
  corpus = testing.make_tiny_corpus(tmp_path / "corpus", PROGRAMS, heldout=("matrix",))
  out = tmp_path / "run"

  capsys.readouterr()
  assert cli.pipeline_main(["--problem=inline_few", f"--corpus={corpus}",
                            f"--output={out}"]) == 0
  printed = capsys.readouterr()
  assert f"gin: {problem_dir / 'inline_few.gin'}" in printed.err
  last = printed.out.strip().splitlines()[-1]
  m = re.fullmatch(r"modules=1 default_text=(\d+) policy_text=(\d+) change=[+-]\d+\.\d\d% "
                   r"regressions=[01]", last)
  assert m, last
  # The problem's own gin file was read without --gin_files.
  operative = (out / "operative_config.gin").read_text()
  assert "PipelineConfig.ppo_iterations = 1" in operative
  assert "PPOConfig.modules_per_iteration = 3" in operative
  # The trace holds the five features the problem shows, and clang's decisions.
  ds = dataset.Dataset(out / "trace")
  assert ds.problem == "inline_few" and [f["name"] for f in ds.features] == SEEN
  assert ds.num_decisions > 10
  assert all(info["ok"] for info in ds.modules.values())
  # BC and PPO trained the problem's own 16-unit network on those inputs.
  bc = policy_io.load_policy(out / "bc_policy")
  assert bc.problem == "inline_few" and bc.input_names == SEEN
  assert bc.spec["architecture"]["hidden"] == [16]
  log = [json.loads(l) for l in (out / "ppo" / "log.jsonl").read_text().splitlines()]
  assert [r["iteration"] for r in log] == [1]
  assert log[0]["ok"] == 3 and log[0]["decisions"] > 0
  final = policy_io.load_policy(out / "policy")
  assert final.problem == "inline_few" and final.input_names == SEEN
  # Evaluated again by the evaluator alone: the same held-out sizes.
  capsys.readouterr()
  s = evaluation.evaluate("inline_few", corpus, out / "policy", tmp_path / "eval",
                          split="heldout")
  assert (s["default"], s["policy_score"]) == (int(m.group(1)), int(m.group(2)))


def test_without_the_path_the_problem_is_gone(problem_dir, monkeypatch):
  assert "inline_few" in problems.problem_names()
  monkeypatch.delenv(problems.PATH_VARIABLE)
  assert "inline_few" not in problems.problem_names()
  with pytest.raises(KeyError, match="unknown problem 'inline_few'"):
    problems.get_problem("inline_few")


@pytest.mark.parametrize("text,message", [
    ("PROBLEMS = {", "cannot load this problem file: SyntaxError"),
    ("X = 1\n", "defines no PROBLEMS dict"),
    ("PROBLEMS = {'a': 3}\n", "PROBLEMS must map names to functions"),
    ("from mlgo.problems import inlining\nPROBLEMS = {'inlining': inlining.make_problem}\n",
     "problem 'inlining' is defined twice"),
])
def test_a_bad_problem_file_is_refused_with_its_path(problem_dir, text, message):
  bad = problem_dir / "bad.py"
  bad.write_text(text)
  with pytest.raises(problems.ProblemError) as e:
    problems.problem_names()
  assert str(bad) in str(e.value) and message in str(e.value)


def test_a_factory_must_return_its_own_problem(problem_dir):
  (problem_dir / "renamed.py").write_text(
      "from mlgo.problems import inlining\nPROBLEMS = {'other': inlining.make_problem}\n")
  with pytest.raises(problems.ProblemError, match=r"renamed\.py: PROBLEMS\['other'\] must "
                     r"return the Problem named 'other', got 'inlining'"):
    problems.get_problem("other")


def test_a_missing_directory_is_named(monkeypatch, tmp_path):
  monkeypatch.setenv(problems.PATH_VARIABLE, str(tmp_path / "nowhere"))
  with pytest.raises(problems.ProblemError, match="nowhere is not a directory"):
    problems.problem_names()
