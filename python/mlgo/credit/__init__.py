"""Per-decision credit: how much of a key's reward each decision earned.

By default every decision of a key (a module for inlining, a function for regalloc)
gets the key's reward. A credit model splits it: in the worker that compiled the module
its annotator reads the compiler's outputs (remarks, the object) and returns, per
trajectory, a per-decision estimate of the score change each decision caused
(`annotations["decision_delta"]`, in score units, e.g. bytes); the shared experience
builder (mlgo.training.experience) adds `credit_weight * -delta / default score` to each
decision's reward. Built once for every trainer; a credit is chosen in gin:

    PPOConfig.credit = "ir2native"
    PPOConfig.credit_model = "/path/to/ir2native_model"

Kinds: "ir2native" (inlining: the IR2Native native-size model, mlgo.credit.ir2native).
"""
KINDS = ("ir2native",)


def make_annotator(kind: str, model_path: str, problem):
  """The picklable annotator of credit `kind` for `problem` ("" or None: no credit)."""
  if not kind:
    return None
  if kind == "ir2native":
    from mlgo.credit import ir2native  # pylint: disable=import-outside-toplevel
    from mlgo.util.cli import user_path  # pylint: disable=import-outside-toplevel
    return ir2native.Annotator.for_problem(str(user_path(model_path)) if model_path else "",
                                           problem)
  raise ValueError(f"unknown credit {kind!r} (one of {', '.join(KINDS)})")
