"""XLA AOT compilation of a policy SavedModel and the C++ model table.

The generated header `mlgo_model.h` wraps the AOT class with the list of the model's
inputs (name, LLVM element type, element count) and its output, so the native code can
match the model against the features the compiler announces, by name, and refuse a
mismatch at load time instead of feeding the wrong values.
"""
import dataclasses
import json
import os
import pathlib
import shutil
import subprocess
import sys

# TF's C++ logging (CUDA probes, oneDNN notes) would bury our messages.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

SIGNATURE = "action"
# Inputs tf-agents policies carry that no compiler sends; the native code feeds zeros.
BOOKKEEPING_INPUTS = ("step_type", "discount", "reward")
# What the compiler calls the decision, per problem (the header's "advice" name).
DECISIONS = {"inlining": "inlining_decision", "inlining_ir2vec": "inlining_decision",
             "inlining_ctx": "inlining_decision", "inlining_ir2vec_ctx": "inlining_decision",
             "regalloc_eviction": "index_to_evict", "regalloc_priority": "priority"}
# LLVM TensorSpec type names (what the interactive header says) per TF dtype.
_LLVM_TYPES = {"int64": "int64_t", "int32": "int32_t", "float32": "float",
               "float64": "double", "int8": "int8_t", "uint8": "uint8_t"}
_ELEM_SIZE = {"int64_t": 8, "int32_t": 4, "float": 4, "double": 8, "int8_t": 1, "uint8_t": 1}


class ExportError(RuntimeError):
  """A policy or SavedModel that cannot be exported; the message says which and why."""


@dataclasses.dataclass(frozen=True)
class TensorInfo:
  name: str
  dtype: str      # LLVM type name: int64_t, float, ...
  shape: tuple

  @property
  def elements(self) -> int:
    n = 1
    for d in self.shape:
      n *= max(int(d), 1)
    return n

  @property
  def elem_size(self) -> int:
    return _ELEM_SIZE[self.dtype]

  def to_json(self):
    return {"name": self.name, "type": self.dtype, "shape": list(self.shape)}


@dataclasses.dataclass(frozen=True)
class ModelSpec:
  inputs: tuple
  outputs: tuple
  problem: str

  @property
  def output(self) -> TensorInfo:
    return self.outputs[0]

  def feature_names(self):
    return [t.name for t in self.inputs if t.name not in BOOKKEEPING_INPUTS]


def infer_problem(input_names, output_names) -> str:
  names = set(input_names) | set(output_names)
  if "inlining_decision" in names or "callee_basic_block_count" in names:
    return ("inlining" + ("_ir2vec" if "callee_embedding" in names else "") +
            ("_ctx" if "callee_times_inlined" in names else ""))
  if "index_to_evict" in names or "mask" in names:
    return "regalloc_eviction"
  if "priority" in names or "li_size" in names:
    return "regalloc_priority"
  return ""


def read_signature(saved_model_dir, signature: str = SIGNATURE, problem: str = "") -> ModelSpec:
  """Inputs/outputs of a SavedModel signature, read from saved_model.pb (no graph load)."""
  sm = pathlib.Path(saved_model_dir)
  pb = sm / "saved_model.pb"
  if not pb.exists():
    raise ExportError(f"{sm}: not a SavedModel directory (no saved_model.pb)")
  from tensorflow.core.protobuf import saved_model_pb2  # pylint: disable=import-outside-toplevel
  from tensorflow.python.framework import dtypes  # pylint: disable=import-outside-toplevel
  proto = saved_model_pb2.SavedModel()
  try:
    proto.ParseFromString(pb.read_bytes())
  except Exception as e:  # protobuf raises DecodeError
    raise ExportError(f"{pb}: cannot parse SavedModel protobuf: {e}") from e
  sig = None
  for mg in proto.meta_graphs:
    if "serve" in mg.meta_info_def.tags and signature in mg.signature_def:
      sig = mg.signature_def[signature]
  if sig is None:
    raise ExportError(f"{sm}: no signature {signature!r} with tag 'serve' "
                      f"(the training code saves the policy under signature {SIGNATURE!r})")

  def conv(key, info):
    dt = dtypes.as_dtype(info.dtype).name
    if dt not in _LLVM_TYPES:
      raise ExportError(f"{sm}: signature {signature!r} tensor {key!r} has dtype {dt}, "
                        f"which LLVM's model runners do not support")
    shape = tuple(max(int(d.size), 1) for d in info.tensor_shape.dim)
    return TensorInfo(key, _LLVM_TYPES[dt], shape or (1,))

  inputs = tuple(conv(k, v) for k, v in sorted(sig.inputs.items()))
  outputs = tuple(conv(k, v) for k, v in sorted(sig.outputs.items()))
  if not outputs:
    raise ExportError(f"{sm}: signature {signature!r} has no outputs")
  problem = problem or infer_problem([t.name for t in inputs], [t.name for t in outputs])
  if len(outputs) > 1:
    want = DECISIONS.get(problem)
    chosen = [t for t in outputs if t.name == want]
    if not chosen:
      raise ExportError(f"{sm}: signature {signature!r} has {len(outputs)} outputs and none "
                        f"is named {want!r}")
    outputs = tuple(chosen) + tuple(t for t in outputs if t.name != want)
  return ModelSpec(inputs, outputs, problem)


def saved_model_cli() -> str:
  """The venv's saved_model_cli (next to this interpreter, or MLGO_PYTHON's)."""
  cands = [os.environ.get("MLGO_SAVED_MODEL_CLI", "")]
  cands.append(str(pathlib.Path(sys.executable).parent / "saved_model_cli"))
  if os.environ.get("MLGO_PYTHON"):
    cands.append(str(pathlib.Path(os.environ["MLGO_PYTHON"]).parent / "saved_model_cli"))
  cands.append(shutil.which("saved_model_cli") or "")
  for c in cands:
    if c and os.path.exists(c):
      return c
  raise ExportError("saved_model_cli not found (looked next to %s and MLGO_PYTHON); "
                    "run ./setup.sh to create the venv with TensorFlow" % sys.executable)


def aot_compile(saved_model_dir, out_dir, cpp_class: str = "mlgo::Policy",
                prefix: str = "policy", signature: str = SIGNATURE, problem: str = "",
                timeout: float = 600) -> dict:
  """Runs saved_model_cli aot_compile_cpu; writes PREFIX.h/.o/_metadata.o + mlgo_model.h.

  Returns the paths. The target is the generic x86-64 CPU so the objects run on any
  machine the compiler runs on (and compile byte-identically everywhere).
  """
  spec = read_signature(saved_model_dir, signature, problem)
  out = pathlib.Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  # saved_model_cli names the entry symbol and header guard after --output_prefix: run it
  # in the output dir with a bare prefix so the files do not depend on where they are
  # built (reproducible objects, e.g. //llvm_patches:clang_release in any output base).
  cmd = [saved_model_cli(), "aot_compile_cpu", "--dir", str(pathlib.Path(saved_model_dir).resolve()),
         "--tag_set", "serve", "--signature_def_key", signature,
         "--output_prefix", prefix, "--cpp_class", cpp_class,
         "--target_triple", "x86_64-pc-linux"]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=out)
  header = out / f"{prefix}.h"
  if res.returncode != 0 or not header.exists():
    tail = "\n".join((res.stderr or "").strip().splitlines()[-15:])
    raise ExportError(f"XLA AOT compile of {saved_model_dir} failed "
                      f"(exit {res.returncode}):\n{tail}")
  # Drop the makefile fragment: it holds absolute paths of this machine.
  (out / f"{prefix}_makefile.inc").unlink(missing_ok=True)
  model_h = out / "mlgo_model.h"
  write_model_header(spec, model_h, f"{prefix}.h", cpp_class)
  return {"header": header, "object": out / f"{prefix}.o",
          "metadata": out / f"{prefix}_metadata.o", "model_header": model_h, "spec": spec}


def _c_str(s: str) -> str:
  return json.dumps(s)  # a JSON string is a valid C string literal for these names


def write_model_header(spec: ModelSpec, path, aot_header: str, cpp_class: str):
  """mlgo_model.h: `mlgo_model::Model` plus the input/output tables."""
  def row(t: TensorInfo):
    return f"    {{{_c_str(t.name)}, {_c_str(t.dtype)}, {t.elements}, {t.elem_size}}},"
  lines = [
      "// Generated by mlgo.export.aot: the AOT-compiled policy and its tensor table.",
      "#pragma once",
      "#include <cstdint>",
      f'#include "{aot_header}"',
      "",
      "namespace mlgo_model {",
      f"using Model = {cpp_class};",
      "struct TensorInfo {",
      "  const char *name;",
      "  const char *type;  // LLVM TensorSpec type name",
      "  int64_t elements;",
      "  int64_t elem_size;",
      "};",
      f"inline constexpr const char *kProblem = {_c_str(spec.problem)};",
      f"inline constexpr int kNumInputs = {len(spec.inputs)};",
      "inline constexpr TensorInfo kInputs[] = {",
      *[row(t) for t in spec.inputs],
      "};",
      "inline constexpr TensorInfo kOutput =",
      row(spec.output).rstrip(",").replace("    ", "    ", 1) + ";",
      "inline constexpr const char *kBookkeeping[] = {"
      + ", ".join(_c_str(b) for b in BOOKKEEPING_INPUTS) + "};",
      "}  // namespace mlgo_model",
      "",
  ]
  pathlib.Path(path).write_text("\n".join(lines))
