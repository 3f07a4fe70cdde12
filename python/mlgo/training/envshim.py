"""The environment and problem registry training runs against (one place to swap them)."""


def env_and_problems():
  from mlgo import env, problems  # pylint: disable=import-outside-toplevel
  return env, problems
