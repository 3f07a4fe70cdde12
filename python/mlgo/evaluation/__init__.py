"""Evaluation of a policy against the default heuristic on a corpus split."""
from mlgo.evaluation.evaluate import evaluate
from mlgo.evaluation.report import summary_line

__all__ = ["evaluate", "summary_line"]
