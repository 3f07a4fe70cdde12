"""An instruction-mix vocabulary for clang-22's IR2Vec inliner features.

With `-ml-inliner-ir2vec-vocab-file=F -ir2vec-vocab-path=F`, clang-22's ML inline advisor
also sends `callee_embedding` and `caller_embedding` (float32 [D]) per call site: the sum,
over the function's instructions, of the vocabulary vectors of each instruction's opcode
(weight 1), result type (0.5) and operand kinds (0.2 each). LLVM's published vocabulary is
a learned 300-d embedding; ours is a plain, readable basis instead: one dimension per
opcode group, so an embedding *is* the function's instruction mix (how many calls, loads,
stores, branches, exception-handling instructions, ...) plus its instruction count and how
many of its operands are functions, constants and pointers. The 38 stock features say how
big the callee is; they do not say what it is made of, and probes showed that matters
for the size effect of inlining it.

Keys are the names clang-22 looks up (opcode names as `opt -passes=print<ir2vec-vocab>`
lists them); a name missing from the vocabulary counts as a zero vector.
"""
import hashlib
import json
import os
import pathlib
import tempfile

# dimension name -> opcodes counted there
OPCODE_GROUPS = (
    ("call", ("Call",)),
    ("exception_handling", ("Invoke", "Resume", "LandingPad", "CleanupRet", "CatchRet",
                            "CatchSwitch", "CleanupPad", "CatchPad")),
    ("load", ("Load",)),
    ("store", ("Store",)),
    ("alloca", ("Alloca",)),
    ("address_arith", ("GetElementPtr",)),
    ("branch", ("Br", "Switch", "IndirectBr", "CallBr")),
    ("exit", ("Ret", "Unreachable")),
    ("compare_select_phi", ("ICmp", "FCmp", "Select", "PHI", "Freeze")),
    ("integer_arith", ("Add", "Sub", "Mul", "UDiv", "SDiv", "URem", "SRem", "Shl", "LShr",
                       "AShr", "And", "Or", "Xor")),
    ("float_arith", ("FNeg", "FAdd", "FSub", "FMul", "FDiv", "FRem")),
    ("cast", ("Trunc", "ZExt", "SExt", "FPToUI", "FPToSI", "UIToFP", "SIToFP", "FPTrunc",
              "FPExt", "PtrToInt", "PtrToAddr", "IntToPtr", "BitCast", "AddrSpaceCast")),
    ("atomic", ("Fence", "AtomicCmpXchg", "AtomicRMW")),
    ("aggregate_vector", ("ExtractElement", "InsertElement", "ShuffleVector", "ExtractValue",
                          "InsertValue", "VAArg")),
)
# Every opcode also adds 1 here: the instruction count.
INSTRUCTIONS = "instructions"
# operand kind -> dimension (each operand adds the argument weight, 0.2, there)
OPERAND_DIMS = (("Function", "function_operands"), ("Constant", "constant_operands"),
                ("Pointer", "pointer_operands"))
TYPES = ("FloatTy", "VoidTy", "LabelTy", "MetadataTy", "VectorTy", "TokenTy", "IntegerTy",
         "FunctionTy", "PointerTy", "StructTy", "ArrayTy", "UnknownTy")

DIMENSIONS = tuple([g for g, _ in OPCODE_GROUPS] + [INSTRUCTIONS] + [d for _, d in OPERAND_DIMS])
DIM = len(DIMENSIONS)


def vocabulary() -> dict:
  """The vocabulary as clang-22 reads it: sections Opcodes, Types, Arguments."""
  def unit(*dims):
    v = [0.0] * DIM
    for d in dims:
      v[DIMENSIONS.index(d)] = 1.0
    return v
  opcodes = {}
  for group, names in OPCODE_GROUPS:
    for n in names:
      opcodes[n] = unit(group, INSTRUCTIONS)
  args = {kind: unit(dim) for kind, dim in OPERAND_DIMS}
  args["Variable"] = unit()
  return {"Opcodes": opcodes, "Types": {t: unit() for t in TYPES}, "Arguments": args}


def vocabulary_path(home=None) -> pathlib.Path:
  """Writes the vocabulary (once; content-addressed, so versions never clash) under
  MLGO_HOME/ir2vec/ and returns its path."""
  from mlgo.util import cli  # pylint: disable=import-outside-toplevel
  text = json.dumps(vocabulary(), sort_keys=True)
  name = f"vocab-{hashlib.sha1(text.encode()).hexdigest()[:12]}.json"
  d = pathlib.Path(home or cli.mlgo_home()) / "ir2vec"
  try:
    return _write_once(d / name, text)
  except OSError:
    if home:  # a directory the caller chose: say so instead of writing elsewhere
      raise
    # MLGO_HOME not writable (e.g. inside Bazel's test sandbox): the temp dir will do, the
    # file is small and rewritten on demand.
    return _write_once(pathlib.Path(tempfile.gettempdir()) / "mlgo-ir2vec" / name, text)


def _write_once(path: pathlib.Path, text: str) -> pathlib.Path:
  if not path.exists():
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name, dir=path.parent)
    with os.fdopen(fd, "w") as f:
      f.write(text)
    os.replace(tmp, path)  # atomic: parallel workers may write it at the same time
  return path


def clang_options(path) -> tuple:
  """The -mllvm options (unwrapped) that make clang-22 send the embeddings."""
  return (f"-ml-inliner-ir2vec-vocab-file={path}", f"-ir2vec-vocab-path={path}")


def clang_args(path) -> list:
  """The same options as clang driver arguments (each behind -mllvm)."""
  return [x for o in clang_options(path) for x in ("-mllvm", o)]
