"""The Bazel face of a policy directory (mlgo.policy.policy_io's layout), one definition
for every model under models/."""

def policy_dir():
    """:saved_policy (the TF SavedModel: AOT compile, plugin, release prefix) and :policy
    (policy.json + weights.npz: the numpy policy collection, evaluation and tests load)."""
    native.filegroup(
        name = "saved_policy",
        srcs = native.glob(["saved_policy/**"]),
    )
    native.filegroup(
        name = "policy",
        srcs = ["policy.json", "weights.npz"],
    )
