"""Access to mlgo.env / mlgo.problems, with a minimal inlining-only stand-in.

The stand-in (`_stopgap_env`) exists so training could be developed before the
environment package landed; `mlgo.env` is preferred when importable, unless
MLGO_TRAINING_ENV=stopgap pins the stand-in (a long run keeps one environment).
"""


import os


def env_and_problems():
  if os.environ.get("MLGO_TRAINING_ENV") == "stopgap":
    from mlgo.training import _stopgap_env as s  # pylint: disable=import-outside-toplevel
    return s, s
  try:
    from mlgo import env, problems  # pylint: disable=import-outside-toplevel
    if hasattr(env, "compile_module") and hasattr(problems, "get_problem"):
      return env, problems
    raise ImportError("mlgo.env incomplete")
  except ImportError:
    from mlgo.training import _stopgap_env as s  # pylint: disable=import-outside-toplevel
    return s, s
