"""IR2Native: a learned model of a function's native (.text) size from the IR features the
inliner already sends, used in training only, to give each inlining decision its own
reward (mlgo.credit.ir2native).

  states   per-decision caller/callee names (from the inliner's remarks) and each
           function's state (size features) over the decision stream
  dataset  collects (end-of-inlining state, final-IR features, native size) rows per
           function of a corpus, in parallel, resumable
  model    the size model (a small MLP on log features), its baselines and its report
"""
