"""Release mode: a trained policy as artifacts a stock compiler can use without Python.

- `aot`: reads a SavedModel's "action" signature, runs XLA AOT (saved_model_cli
  aot_compile_cpu) and writes `mlgo_model.h`, the table of inputs/outputs the native
  plugin and server compile against.
- `native`: compiles the inline-advisor plugin / advisor server outside Bazel with the
  system C++ compiler (what `tools/export_policy` ships to users).
- `export`: the one-command export (SavedModel copy, TFLite + output_spec.json, AOT,
  plugin or server).
- `server`: runs a compile with the native advisor server on the interactive channel.
- `tiny`: small deterministic policies in the training format, for tests and benchmarks
  before a trained policy exists.
"""
