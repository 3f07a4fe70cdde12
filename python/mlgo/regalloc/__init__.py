"""Register-allocation problems (eviction, priority): prepared corpora, the default
tracer, policy networks, behavioral cloning, PPO training and evaluation."""
