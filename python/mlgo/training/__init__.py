"""Training, the same code for every problem: default traces (trace), behavioral cloning
(bc), PPO with tf-agents (ppo; experience: results to batches, selection: the kept
policy), the end-to-end run (pipeline), rollout probes (rollouts, probe_tuning,
probe_widening), and the tf-agents networks of each policy architecture (networks).

A problem plugs in only through its description (mlgo.problems: keys, scores, reward,
architecture, exploration); policy files are mlgo.policy's, compiles mlgo.env's.
"""
import warnings

# Autograph compiles a generated copy of tf-agents code that tests `state is not ()`;
# Python 3.11 warns about that literal once a run, on stderr, for code that is not ours.
warnings.filterwarnings("ignore", message='"is not" with a literal', category=SyntaxWarning)
