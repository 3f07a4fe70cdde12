"""Training: default traces, normalization, behavioral cloning, PPO, policy files.

Problem-generic: a problem (inlining, regalloc eviction, regalloc priority) plugs in
through `mlgo.training.adapters` (feature encoding, networks, reward); everything
else (datasets, worker pool, checkpoints, export) is shared.
"""
