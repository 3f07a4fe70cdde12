"""Helpers for tests: test data files, a tiny real corpus compiled from a few source
files, random observations of the regalloc problems and a policy spec fitted on them."""
import functools
import json
import os
import signal
import time
import pathlib
import tempfile

import numpy as np

from mlgo import corpus as corpus_lib
from mlgo.corpus import build
from mlgo.util import toolchain
from mlgo import problems as problems_lib
from mlgo.policy import normalization, policy_io
from mlgo.training import bc as bc_lib


def data_path(rel: str) -> str:
  """A file of the checkout (e.g. testdata/programs/calls.c), from Bazel's runfiles under
  `bazel test` or from the source tree."""
  cands = []
  srcdir = os.environ.get("TEST_SRCDIR")
  if srcdir:
    cands.append(pathlib.Path(srcdir) / os.environ.get("TEST_WORKSPACE", "mlgo") / rel)
  cands.append(pathlib.Path(__file__).resolve().parents[3] / rel)
  for c in cands:
    if c.exists():
      return str(c)
  raise FileNotFoundError(f"{rel} not found in {[str(c) for c in cands]}")


def shipped_policy(name: str) -> pathlib.Path:
  """The policy dir of models/`name` (runfiles or checkout)."""
  return pathlib.Path(data_path(f"models/{name}/policy.json")).parent


def tool_module(name: str):
  """tools/NAME.py loaded as a module (runfiles or checkout): its main(argv) runs the tool
  in the test's process, so its output reaches capsys."""
  import importlib.util  # pylint: disable=import-outside-toplevel
  spec = importlib.util.spec_from_file_location(f"{name}_tool", data_path(f"tools/{name}.py"))
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod


def program(name: str) -> str:
  """A project-written test program (testdata/programs/NAME)."""
  return data_path(f"testdata/programs/{name}")


@functools.lru_cache(maxsize=None)
def process_workdir(prefix: str) -> str:
  """A directory for built files, shared by the tests of one process (under Bazel's
  TEST_TMPDIR when set)."""
  base = os.environ.get("TEST_TMPDIR") or tempfile.gettempdir()
  return tempfile.mkdtemp(prefix=prefix, dir=base)


def make_tiny_corpus(out_dir, sources, llvm_version: int = toolchain.DEFAULT_LLVM_VERSION,
                     opt: str = "Oz", heldout=(), variants: int = 1) -> pathlib.Path:
  """Compiles each source (.c / .cc) to pre-optimization bitcode in a corpus at out_dir.

  `heldout`: file stems put in the heldout split (others: train). `variants` > 1 adds
  copies compiled with -DMLGO_VARIANT=i, so the corpus has more modules.
  """
  tc = toolchain.toolchain(llvm_version)
  out = pathlib.Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  w = corpus_lib.CorpusWriter(out, llvm_version=llvm_version, opt_level=opt)
  for src in sources:
    src = pathlib.Path(src)
    cxx = src.suffix in (".cc", ".cpp", ".cxx")
    driver = tc.clangxx if cxx else tc.clang
    for v in range(variants):
      flags = [f"-{opt}", "-w"] + (["-std=c++17"] if cxx else []) + [f"-DMLGO_VARIANT={v}"]
      name = f"{src.stem}/v{v}" if variants > 1 else src.stem
      bc = out / "_tmp.bc"
      r = build._run([driver] + flags + ["-Xclang", "-disable-llvm-passes", "-emit-llvm",
                                         "-c", str(src), "-o", str(bc)], timeout=120)
      if r.returncode != 0:
        raise RuntimeError(f"{src}: compile failed: {r.stderr[:500]}")
      cc1 = build.cc1_of(driver, flags, str(src), os.getcwd())
      if "-emit-obj" not in cc1:
        cc1.insert(1, "-emit-obj")
      w.add(name, str(bc), cc1, package=src.stem, language="c++" if cxx else "c",
            split="heldout" if src.stem in heldout else "train", move=True)
  return w.finish()


def prepared_tiny_corpus(out_dir, sources, heldout=(), variants: int = 1):
  """make_tiny_corpus at -O2 in OUT_DIR/corpus, prepared for llc in OUT_DIR/prepared:
  the corpus the regalloc problems compile."""
  from mlgo.env import prepared  # pylint: disable=import-outside-toplevel
  out = pathlib.Path(out_dir)
  corpus = make_tiny_corpus(out / "corpus", sources, opt="O2", heldout=heldout,
                            variants=variants)
  return prepared.prepare(corpus, out_root=out / "prepared")


def fake_eviction_features(n: int, rng) -> dict:
  """n random eviction observations (raw features; a NaN like LLVM sometimes sends)."""
  feats = {}
  for f in problems_lib.get_problem("regalloc_eviction").features:
    shape = (n,) + tuple(f.shape)   # the problem's own layout: [1, columns] or [1]
    if f.name == "mask":
      v = (rng.random(shape) < 0.3).astype(np.int64)
      v[:, 0, rng.integers(0, shape[-1], n)] = 1
    elif f.name == "progress":
      v = rng.random(shape).astype(np.float32)
    elif np.dtype(f.dtype) == np.int64:
      v = rng.integers(0, 4, shape).astype(np.int64)
    else:
      v = rng.random(shape).astype(np.float32) * 10
    feats[f.name] = v
  feats["use_def_density"][0, 0, 3] = np.nan  # LLVM sends NaN sometimes
  return feats


def fake_priority_features(n: int, rng) -> dict:
  return {"li_size": rng.integers(1, 500, (n, 1)).astype(np.int64),
          "stage": rng.integers(0, 4, (n, 1)).astype(np.int64),
          "weight": (rng.random((n, 1)) * 3).astype(np.float32)}


def fitted_spec(problem_name: str, feats: dict, seed: int = 0, hidden=None,
                architecture_options=None, log_scale: bool = False):
  """(spec, seeded initial weights, encoded feats): normalization fitted on feats; hidden
  and architecture_options as for the problem's architecture (its defaults if None);
  log_scale as for bc.train_bc."""
  problem = problems_lib.get_problem(problem_name)
  specs = [{"name": f.name, "dtype": np.dtype(f.dtype).name, "shape": list(f.shape)}
           for f in problem.features]
  logs = set(problem.log_scale_features) if log_scale else set()
  norms = [normalization.fit_feature(s["name"], feats[s["name"]],
                                     kind="log" if s["name"] in logs else "slog")
           for s in specs]
  arch = problem.architecture(specs, {n.name: n for n in norms}, hidden, architecture_options)
  spec = bc_lib.make_spec(problem_name, specs, norms, arch)
  enc = policy_io.Policy(spec, {}).encode_batch(feats)
  return spec, bc_lib.init_weights(arch, enc.shape[1], seed), enc


def inline_more_policy(out_dir, shift: float = 3.0, name: str = "inlining_oz") -> pathlib.Path:
  """A copy of the shipped models/`name` whose "inline" logit bias is raised by `shift`:
  a real policy dir that inlines more than the model, so it makes some small modules
  bigger than clang does (what tests of regression-aware searches need)."""
  pol = policy_io.load_policy(shipped_policy(name))
  weights = {k: np.array(v, copy=True) for k, v in pol.arch.w.items()}
  weights["out/bias"][1] += shift
  policy_io.write_policy_dir(out_dir, pol.spec, weights, saved_model=False)
  return pathlib.Path(out_dir)


def logged_records(run_dir) -> list:
  """A trainer output dir's log.jsonl records, [] before the first one."""
  p = pathlib.Path(run_dir) / "log.jsonl"
  if not p.exists():
    return []
  return [json.loads(l) for l in p.read_text().splitlines() if l.strip()]


def checkpoint_iteration(run_dir) -> int:
  """The iteration of the checkpoint a resume in run_dir would start from; 0 if none."""
  run_dir = pathlib.Path(run_dir)
  # A kill between the two renames of a checkpoint swap leaves only checkpoint.old, which
  # the resume renames back.
  for d in ("checkpoint", "checkpoint.old"):
    try:
      return json.loads((run_dir / d / "state.json").read_text())["iteration"]
    except (FileNotFoundError, json.JSONDecodeError):   # absent, or mid-swap
      continue
  return 0


def sigkill_after_first_checkpoint(proc, run_dir, timeout: float):
  """SIGKILLs a trainer (started with start_new_session) as soon as its first iteration's
  checkpoint is on disk, so inside a later iteration; how far that one got depends on the
  machine's speed, which is why callers accept any point (see resume_test)."""
  try:
    deadline = time.monotonic() + timeout
    while checkpoint_iteration(run_dir) < 1 and time.monotonic() < deadline:
      assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
      time.sleep(0.05)
    assert checkpoint_iteration(run_dir) >= 1, f"no checkpoint within {timeout:g}s"
  finally:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
