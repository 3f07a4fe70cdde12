"""One-command export of a policy dir into release artifacts.

OUT/
  saved_policy/          the SavedModel (copy), signature "action"
  policy.json, weights.npz   (copied when present)
  tflite/model.tflite    TFLite model
  tflite/output_spec.json    LLVM's output spec for a model loaded at run time
  aot/policy.h, policy.o, policy_metadata.o, mlgo_model.h   XLA AOT artifacts
  inline_advisor.so      (inlining) pass plugin for stock clang-22 / opt-22
  inline_advisor_llvm19.so   (inlining, if LLVM 19 dev files are installed)
  ir2vec_vocab.json      (inlining_ir2vec) the vocabulary clang-22 must be given:
                         -mllvm -ml-inliner-ir2vec-vocab-file=F -mllvm -ir2vec-vocab-path=F
  advisor_server         (regalloc_eviction / regalloc_priority) channel server
  llvm_embed/InlinerSizeModel.{h,o} or RegAllocEvictModel.{h,o}: the model under LLVM's
                         class name, for a clang built with it (see llvm_patches/)
  export.json            what was built, sizes, checks
"""
import dataclasses
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import time

from mlgo.export import aot, native
from mlgo.export.aot import ExportError
from mlgo.policy import policy_io


# LLVM's names for compiled-in models (cmake: tf_find_and_compile ... <Name> llvm::<Name>).
LLVM_EMBED_CLASSES = {"inlining": "llvm::InlinerSizeModel",
                      "regalloc_eviction": "llvm::RegAllocEvictModel"}


@dataclasses.dataclass
class ExportResult:
  output: pathlib.Path
  problem: str
  files: dict
  checks: dict
  seconds: float


def _log(msg, quiet):
  if not quiet:
    print(f"export: {msg}", flush=True)


def _policy_problem(policy_dir: pathlib.Path) -> str:
  pj = policy_dir / "policy.json"
  if pj.exists():
    try:
      return json.loads(pj.read_text()).get("problem", "")
    except json.JSONDecodeError as e:
      raise ExportError(f"{pj}: not valid JSON ({e})") from e
  return ""


def write_tflite(saved_model: pathlib.Path, out_dir: pathlib.Path, spec: aot.ModelSpec):
  """model.tflite + output_spec.json (LLVM's description of the decision tensor)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  out_dir.mkdir(parents=True, exist_ok=True)
  data, note = None, ""
  # Builtin ops only is what LLVM's TFLite runner can load. Graphs with float64 math
  # (the training code's exact normalization) need TF Select ops; we still write that
  # model, and say so, because it is the faithful conversion.
  for mode in ("builtins", "select"):
    conv = tf.lite.TFLiteConverter.from_saved_model(str(saved_model),
                                                    signature_keys=[aot.SIGNATURE])
    if mode == "select":
      conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS,
                                        tf.lite.OpsSet.SELECT_TF_OPS]
      conv.allow_custom_ops = True
    try:
      with _quiet_stderr() as captured:
        data = conv.convert()
      break
    except Exception as e:  # pylint: disable=broad-except
      note = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
      if mode == "select":
        raise ExportError(f"TFLite conversion of {saved_model} failed: {note}\n"
                          f"{captured.tail()}") from e
  if mode == "select":
    note = ("needs TF Select (flex) / custom ops; LLVM's builtin-only TFLite runner "
            "cannot load it (the graph uses ops TFLite lacks, e.g. float64 math)")
  else:
    note = "builtin ops only"
  (out_dir / "model.tflite").write_bytes(data)
  interp = tf.lite.Interpreter(model_content=data)
  runner = interp.get_signature_runner(aot.SIGNATURE)
  out_details = runner.get_output_details()
  specs = []
  decision = aot.DECISIONS.get(spec.problem, spec.output.name)
  for key in [spec.output.name] + [t.name for t in spec.outputs[1:]]:
    det = out_details[key]
    tname, _, port = det["name"].partition(":")
    t = next(o for o in spec.outputs if o.name == key)
    specs.append({"logging_name": decision if key == spec.output.name else key,
                  "tensor_spec": {"name": tname, "port": int(port or 0), "type": t.dtype,
                                  "shape": list(t.shape)}})
  (out_dir / "output_spec.json").write_text(json.dumps(specs, indent=2) + "\n")
  inputs = {k: v["name"] for k, v in runner.get_input_details().items()}
  if mode == "select":
    # The interpreter cannot run flex ops without the flex delegate; names come from the
    # signature then, which is what LLVM matches anyway.
    pass
  return {"model": out_dir / "model.tflite", "output_spec": out_dir / "output_spec.json",
          "input_tensor_names": inputs, "note": note}


class _quiet_stderr:
  """Sends fd 2 (TF's C++ converter logs) to a temp file; .tail() gives its end."""

  def __enter__(self):
    import sys  # pylint: disable=import-outside-toplevel
    sys.stderr.flush()
    self._f = tempfile.TemporaryFile(mode="w+")
    self._saved = os.dup(2)
    os.dup2(self._f.fileno(), 2)
    return self

  def __exit__(self, *exc):
    os.dup2(self._saved, 2)
    os.close(self._saved)
    self._f.seek(0)
    self._text = self._f.read()
    self._f.close()
    return False

  def tail(self, n: int = 15) -> str:
    return "\n".join(getattr(self, "_text", "").strip().splitlines()[-n:])


def _smoke_test_plugin(so: pathlib.Path, llvm_version: int, extra=()) -> str:
  """Compiles a two-function C file with the plugin; '' if fine, else the error."""
  clang = f"/usr/lib/llvm-{llvm_version}/bin/clang"
  if not os.path.exists(clang):
    return f"clang {llvm_version} not installed; plugin not exercised"
  with tempfile.TemporaryDirectory() as d:
    src = pathlib.Path(d) / "t.c"
    src.write_text("static int sq(int x) { return x * x; }\n"
                   "int f(int a) { return sq(a) + sq(a + 1); }\n")
    res = subprocess.run([clang, "-Oz", f"-fpass-plugin={so}", *extra, "-c", str(src), "-o",
                          str(pathlib.Path(d) / "t.o")], capture_output=True, text=True)
    return "" if res.returncode == 0 else res.stderr.strip()


def export_policy(policy_dir, output_dir, *, tflite: bool = True, build_native: bool = True,
                  llvm_versions=(22, 19), llvm_embed: bool = True,
                  quiet: bool = False) -> ExportResult:
  start = time.monotonic()
  policy_dir = pathlib.Path(policy_dir)
  out = pathlib.Path(output_dir)
  sm_src = policy_dir / "saved_policy"
  files, checks = {}, {}
  if not (sm_src / "saved_model.pb").exists():
    if (policy_dir / "saved_model.pb").exists():
      sm_src = policy_dir  # a bare SavedModel dir is accepted too
    elif (policy_dir / "policy.json").exists() and (policy_dir / "weights.npz").exists():
      # A training iteration's policy dir (PPO writes SavedModels only for the iterations
      # it validates): the SavedModel is made here from policy.json + weights.npz.
      sm_src = out / "saved_policy"
      _log(f"{policy_dir}: no saved_policy/, writing it from policy.json + weights.npz",
           quiet)
      out.mkdir(parents=True, exist_ok=True)
      try:
        policy_io.export_saved_model(policy_io.load_policy(policy_dir), sm_src)
      except (ValueError, KeyError, FileNotFoundError) as e:
        raise ExportError(f"{policy_dir}: cannot build a SavedModel from policy.json + "
                          f"weights.npz: {e}") from e
      checks["saved_model_written"] = True
    else:
      raise ExportError(f"{policy_dir}: no saved_policy/saved_model.pb (expected a policy dir "
                        f"written by mlgo training, or a SavedModel dir)")
  spec = aot.read_signature(sm_src, problem=_policy_problem(policy_dir))
  if not spec.problem:
    raise ExportError(f"{policy_dir}: cannot tell the problem (no policy.json 'problem', and "
                      f"the signature's names match no known problem)")
  out.mkdir(parents=True, exist_ok=True)

  _log(f"{spec.problem} policy, {len(spec.feature_names())} features -> {out}", quiet)
  sm_dst = out / "saved_policy"
  if sm_dst.resolve() != sm_src.resolve():
    shutil.rmtree(sm_dst, ignore_errors=True)
    shutil.copytree(sm_src, sm_dst)
  files["saved_model"] = sm_dst
  for name in ("policy.json", "weights.npz"):
    if (policy_dir / name).exists() and (policy_dir / name).resolve() != (out / name).resolve():
      shutil.copy2(policy_dir / name, out / name)
      files[name] = out / name

  if tflite:
    _log("TFLite conversion", quiet)
    t = write_tflite(sm_dst, out / "tflite", spec)
    files["tflite"] = t["model"]
    files["output_spec"] = t["output_spec"]
    checks["tflite"] = t["note"]
    checks["tflite_input_tensors"] = t["input_tensor_names"]

  _log("XLA AOT compile (saved_model_cli aot_compile_cpu)", quiet)
  a = aot.aot_compile(sm_dst, out / "aot", problem=spec.problem)
  files.update({"aot_header": a["header"], "aot_object": a["object"],
                "aot_metadata": a["metadata"], "model_header": a["model_header"]})

  # The same model under the class names LLVM's own build expects, for a clang with the
  # policy compiled in (llvm_patches/: LLVM_OVERRIDE_MODEL_{HEADER,OBJECT}_<NAME>).
  embed = LLVM_EMBED_CLASSES.get(spec.problem)
  if embed and llvm_embed:
    _log(f"XLA AOT compile as {embed} for a patched clang (llvm_patches/)", quiet)
    e = aot.aot_compile(sm_dst, out / "llvm_embed", cpp_class=embed,
                        prefix=embed.split("::")[-1], problem=spec.problem)
    (out / "llvm_embed" / "mlgo_model.h").unlink(missing_ok=True)
    files["llvm_embed_header"] = e["header"]
    files["llvm_embed_object"] = e["object"]

  if build_native:
    if spec.problem.startswith("inlining"):
      extra = ()
      if spec.problem.startswith("inlining_ir2vec"):
        # The vocabulary travels with the plugin: clang computes the embeddings from it.
        from mlgo.problems import ir2vec  # pylint: disable=import-outside-toplevel
        vocab = out / "ir2vec_vocab.json"
        shutil.copy2(ir2vec.vocabulary_path(), vocab)
        files["ir2vec_vocab"] = vocab
        extra = tuple(ir2vec.clang_args(vocab.resolve()))
        checks["clang_flags"] = " ".join(extra)
      for v in llvm_versions:
        if not os.path.exists(f"/usr/lib/llvm-{v}/bin/llvm-config"):
          checks[f"plugin_llvm{v}"] = "skipped: llvm-%d-dev not installed" % v
          continue
        if extra and v < 22:
          checks[f"plugin_llvm{v}"] = f"skipped: LLVM {v} sends no IR2Vec embeddings"
          continue
        if spec.problem.endswith("_ctx") and v < 22:
          checks[f"plugin_llvm{v}"] = f"skipped: context models are built for LLVM 22"
          continue
        name = "inline_advisor.so" if v == llvm_versions[0] else f"inline_advisor_llvm{v}.so"
        _log(f"building {name} (LLVM {v})", quiet)
        so = native.build_plugin(out / "aot", out / name, llvm_version=v)
        files[f"plugin_llvm{v}"] = so
        libs = native.shared_libraries(so)
        tf_libs = [lib for lib in libs if "tensorflow" in lib or "xla" in lib]
        if tf_libs:
          raise ExportError(f"{so} links TensorFlow libraries {tf_libs}; it must not")
        err = _smoke_test_plugin(so, v, extra)
        if err and "not installed" not in err:
          raise ExportError(f"{so} does not load into clang-{v}:\n{err}")
        checks[f"plugin_llvm{v}"] = err or "loads into clang, no TensorFlow in ldd"
    else:
      _log("building advisor_server", quiet)
      srv = native.build_server(out / "aot", out / "advisor_server")
      files["advisor_server"] = srv
      res = subprocess.run([str(srv), "--print_spec"], capture_output=True, text=True)
      if res.returncode != 0:
        raise ExportError(f"{srv} --print_spec failed: {res.stderr}")
      checks["advisor_server"] = "runs; %d model inputs" % (len(res.stdout.splitlines()) - 1)

  sizes = {k: os.path.getsize(v) for k, v in files.items() if pathlib.Path(v).is_file()}
  manifest = {
      "problem": spec.problem,
      "policy": str(policy_dir.resolve()),
      "features": [t.to_json() for t in spec.inputs],
      "output": spec.output.to_json(),
      "files": {k: os.path.relpath(v, out) for k, v in files.items()},
      "sizes": sizes,
      "checks": checks,
  }
  (out / "export.json").write_text(json.dumps(manifest, indent=1) + "\n")
  secs = time.monotonic() - start
  _log(f"done in {secs:.1f}s", quiet)
  return ExportResult(out, spec.problem, files, checks, secs)
