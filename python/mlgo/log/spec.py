"""Types and rules of LLVM's training-log stream, shared by both readers.

The stream (LLVM's TrainingLogger, also what the interactive channel sends):
  one JSON header line  {"features":[spec...], "score":spec?, "advice":spec?}
  then events, each a JSON line with exactly one key:
    {"context":NAME}                       starts a new context (function/module)
    {"observation":N} + raw tensors + \\n   every feature in header order
    {"outcome":N} + raw score tensor + \\n  only when the header has "score"
A spec is {"name":str, "port":int, "shape":[int...], "type":TYPE}. Tensor bytes are
in native byte order; their sizes come from type and shape, never from newlines.

The native reader (cc/log_reader) enforces exactly the same rules and limits: the
differential tests check that both accept and reject the same inputs.
"""

import dataclasses
from typing import NamedTuple, Optional

import numpy as np

# LLVM's type names (TensorSpec.h, SUPPORTED_TENSOR_TYPES) -> numpy dtypes.
DTYPES = {
    "float": np.dtype(np.float32),
    "double": np.dtype(np.float64),
    "int8_t": np.dtype(np.int8),
    "uint8_t": np.dtype(np.uint8),
    "int16_t": np.dtype(np.int16),
    "uint16_t": np.dtype(np.uint16),
    "int32_t": np.dtype(np.int32),
    "uint32_t": np.dtype(np.uint32),
    "int64_t": np.dtype(np.int64),
    "uint64_t": np.dtype(np.uint64),
}
TYPE_NAMES = {dt: name for name, dt in DTYPES.items()}

# Limits, identical in the native reader (log_reader.h).
MAX_HEADER_LINE = 16 << 20    # bytes of the header line, without its newline
MAX_EVENT_LINE = 1 << 20      # bytes of an event line, without its newline
MAX_JSON_DEPTH = 64           # nesting of arrays/objects in one line
MAX_DIM = (1 << 31) - 1       # one dimension of a shape
MAX_TENSOR_BYTES = 1 << 30    # one tensor
MAX_RECORD_BYTES = 1 << 30    # all tensors of one observation
MAX_INT_DIGITS = 4300         # CPython's default int-from-string limit
MAX_INDEX = (1 << 63) - 1


class LogFormatError(ValueError):
  """Malformed training-log stream. `offset` is the byte offset of the record
  (line) where the problem was found, `problem` says what is wrong."""

  def __init__(self, offset: int, problem: str):
    super().__init__(f"malformed training log at byte {offset}: {problem}")
    self.offset = offset
    self.problem = problem

  def __reduce__(self):
    return (type(self), (self.offset, self.problem))


class FeatureSpec(NamedTuple):
  name: str
  dtype: np.dtype
  shape: tuple
  port: int = 0

  @property
  def size(self) -> int:
    n = 1
    for d in self.shape:
      n *= d
    return n

  @property
  def nbytes(self) -> int:
    return self.size * np.dtype(self.dtype).itemsize

  @property
  def type_name(self) -> str:
    return TYPE_NAMES[np.dtype(self.dtype)]

  def to_json(self) -> dict:
    return {"name": self.name, "type": self.type_name, "port": int(self.port),
            "shape": [int(d) for d in self.shape]}


class Context(NamedTuple):
  name: str


class Observation(NamedTuple):
  index: int
  features: list  # one np.ndarray per header feature, shaped like its spec


class Outcome(NamedTuple):
  index: int
  value: np.ndarray  # shaped like the header's score spec


@dataclasses.dataclass
class ContextLog:
  """All observations of one context, stacked: features[name] has the observations
  as its first axis. A context name seen twice in a stream is merged into one entry
  (LLVM keeps counting its observations). Observations before any context line
  (interactive streams have none) belong to the context named ""."""
  name: str
  features: dict
  outcomes: Optional[np.ndarray] = None
  indices: Optional[np.ndarray] = None  # observation numbers as the stream gives them

  def __len__(self) -> int:
    return 0 if self.indices is None else len(self.indices)
