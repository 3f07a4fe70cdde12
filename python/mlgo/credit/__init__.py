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

Kinds:
- "ir2native" (inlining: the IR2Native native-size model, mlgo.credit.ir2native);
- "function_size" (inlining: each function's real size in the objects of the iteration's
  compiles of the same module, no model; mlgo.credit.function_size). Its deltas need the
  whole batch: the trainer calls the annotator's `complete(results)` before building the
  experience (`complete_batch`).
With PPOConfig.module_reward_weight = 0 a decision's reward is its credit alone.
"""
KINDS = ("ir2native", "function_size")


def make_annotator(kind: str, model_path: str, problem):
  """The picklable annotator of credit `kind` for `problem` ("" or None: no credit)."""
  if not kind:
    return None
  if kind == "ir2native":
    from mlgo.credit import ir2native  # pylint: disable=import-outside-toplevel
    from mlgo.util.cli import user_path  # pylint: disable=import-outside-toplevel
    return ir2native.Annotator.for_problem(str(user_path(model_path)) if model_path else "",
                                           problem)
  if kind == "function_size":
    from mlgo.credit import function_size  # pylint: disable=import-outside-toplevel
    return function_size.Annotator.for_problem(problem)
  raise ValueError(f"unknown credit {kind!r} (one of {', '.join(KINDS)})")


def complete_batch(annotator, results):
  """Per-decision deltas that need every compile of the batch (function_size): set on
  each result's annotations; a no-op for credits the worker finished (ir2native)."""
  if annotator is not None and hasattr(annotator, "complete"):
    annotator.complete(results)
