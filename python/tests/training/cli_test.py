"""The training command lines: command 1's config is a fixed PPO count, gin's include
search leaves no error lines, and conflicting or impossible counts are refused."""
import logging

import gin
import pytest

from mlgo.training import cli, pipeline


@pytest.fixture(autouse=True)
def clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()


def test_command_1_config_is_a_fixed_count_and_parses_quietly(caplog):
  with caplog.at_level(logging.INFO):
    cli.parse_and_bind_gin(["configs/regalloc_eviction.gin"], [])
  cfg = pipeline.PipelineConfig()
  assert cfg.ppo_iterations > 0
  # common.gin was found through the search paths, and the misses were not logged.
  assert gin.query_parameter("PPOConfig.seed") == 0
  assert not [r for r in caplog.records if "Path not found" in r.getMessage()]


@pytest.mark.parametrize("args,message", [
    (["--iterations=5", "--time_budget=60"], "not both"),
    (["--iterations=0"], "at least 1"),
])
def test_bad_counts_are_refused_before_any_work(tmp_path, args, message):
  with pytest.raises(SystemExit) as e:
    cli.pipeline_main(args + [f"--output={tmp_path / 'out'}"])
  assert message in str(e.value)
  assert not (tmp_path / "out").exists()
