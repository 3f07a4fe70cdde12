"""The policy-directory contract, the ground floor every other layer reads.

A policy dir (policy.json + weights.npz + saved_policy/) is what training writes and
what the environment, evaluation and export load. This package holds its format
(policy_io), the feature encoding (normalization) and the network architectures as numpy
evaluators with their TF export (architectures registered by name), and the policies
made from other policies (derived: averages, ensembles, deferring copies, widened
starts). It imports nothing
from training, evaluation, export or the environment.
"""
# Registers the regalloc architecture types beside the generic ones (one direction:
# regalloc_architectures imports architectures, never the reverse).
from mlgo.policy import regalloc_architectures  # noqa: F401 pylint: disable=unused-import
