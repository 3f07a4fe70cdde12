import io
import os
import threading

import numpy as np
import pytest

from mlgo.log import (Context, FeatureSpec, LogFormatError, Observation, Outcome,
                      encode_log, pyreader)
from logtestlib import all_dtype_features, synthetic_stream

HEADER = b'{"features":[{"name":"a","type":"int64_t","port":0,"shape":[2]}]}\n'


def events(data):
  return list(pyreader.StreamReader(data))


def test_roundtrip_every_dtype():
  feats, score, ctxs, data = synthetic_stream(seed=1, contexts=4)
  r = pyreader.StreamReader(io.BytesIO(data))
  assert r.header == feats
  assert [f.dtype for f in r.header] == [f.dtype for f in feats]
  assert r.score == score
  evs = list(r)
  expected = []
  for name, recs in ctxs:
    expected.append(Context(name))
    for i, (vals, out) in enumerate(recs):
      expected.append(("obs", i, vals))
      expected.append(("out", i, out))
  assert len(evs) == len(expected)
  for ev, exp in zip(evs, expected):
    if isinstance(ev, Context):
      assert ev == exp
    elif isinstance(ev, Observation):
      assert exp[0] == "obs" and ev.index == exp[1]
      for a, b, spec in zip(ev.features, exp[2], feats):
        assert a.dtype == spec.dtype and a.shape == spec.shape
        np.testing.assert_array_equal(a, b)
    else:
      assert isinstance(ev, Outcome) and exp[0] == "out" and ev.index == exp[1]
      np.testing.assert_array_equal(ev.value, exp[2])


def test_read_log_stacks_and_merges_contexts():
  feats = [FeatureSpec("x", np.dtype(np.int32), (1, 3)),
           FeatureSpec("y", np.dtype(np.float64), ())]
  data = encode_log(feats, [("f", [([[[1, 2, 3]], 0.5], None), ([[[4, 5, 6]], 1.5], None)]),
                            ("g", []),
                            ("f", [([[[7, 8, 9]], 2.5], None)])])
  logs = pyreader.read_log(data)
  assert [l.name for l in logs] == ["f", "g"]
  f = logs[0]
  assert f.features["x"].shape == (3, 1, 3)
  np.testing.assert_array_equal(f.features["x"][:, 0, 2], [3, 6, 9])
  np.testing.assert_array_equal(f.features["y"], [0.5, 1.5, 2.5])
  np.testing.assert_array_equal(f.indices, [0, 1, 0])
  assert f.outcomes is None
  assert logs[1].features["x"].shape == (0, 1, 3) and len(logs[1]) == 0


def test_read_log_from_path_and_fd(tmp_path):
  feats, score, ctxs, data = synthetic_stream(seed=2)
  p = tmp_path / "s.log"
  p.write_bytes(data)
  a = pyreader.read_log(str(p))
  fd = os.open(p, os.O_RDONLY)
  try:
    b = pyreader.read_log(fd)
  finally:
    os.close(fd)
  assert [l.name for l in a] == [l.name for l in b] == [c[0] for c in ctxs]
  for la, lb, (_, recs) in zip(a, b, ctxs):
    assert len(la) == len(recs)
    if recs:
      np.testing.assert_array_equal(la.outcomes[:, 0], [r[1][0] for r in recs])
    for k in la.features:
      np.testing.assert_array_equal(la.features[k], lb.features[k])


def test_pipe_reads_only_the_current_record():
  """The compiler blocks after each observation: a read must return it."""
  rfd, wfd = os.pipe()
  got = []
  r = pyreader.StreamReader(rfd)
  os.write(wfd, HEADER + b'{"context":""}\n')
  assert r.header[0].name == "a"
  assert r.next_event() == Context("")
  for i in range(3):
    os.write(wfd, b'{"observation":%d}\n' % i + np.array([i, 10], np.int64).tobytes() + b"\n")
    ev = r.next_event()  # would hang forever if the reader wanted more bytes
    got.append(ev.features[0].tolist())
  os.close(wfd)
  assert r.next_event() is None
  os.close(rfd)
  assert got == [[0, 10], [1, 10], [2, 10]]


def test_header_is_lazy():
  rfd, wfd = os.pipe()
  r = pyreader.StreamReader(rfd)  # must not block: the compiler writes later
  t = threading.Timer(0.05, lambda: (os.write(wfd, HEADER), os.close(wfd)))
  t.start()
  assert r.header[0].shape == (2,)
  assert r.next_event() is None
  t.join()
  os.close(rfd)


@pytest.mark.parametrize("data,offset,words", [
    (b"", 0, "empty"),
    (b'{"features":[]', 0, "ends inside the header"),
    (b'{"features":[{"name":"a","type":"int128_t","port":0,"shape":[1]}]}\n', 0, "unsupported type"),
    (b'{"features":[{"name":"a","type":"float","port":0,"shape":[-1]}]}\n', 0, "bad dimension"),
    (b'{"features":[{"name":"a","type":"float","port":0,"shape":[65536,65536]}]}\n', 0, "too large"),
    (b'{"features":[{"name":"a","type":"float","port":0,"shape":[1.0]}]}\n', 0, "bad dimension"),
    (b'{"features":[{"name":"a","type":"float","port":0,"shape":[true]}]}\n', 0, "bad dimension"),
    (b'{"features":[],"x":NaN}\n', 0, "not valid JSON"),
    (b'{"features":[],"features":[]}\n', 0, "not valid JSON"),
    (HEADER + b'{"observation":0}\n' + b"\0" * 16, len(HEADER), "ends inside observation 0"),
    (HEADER + b'{"observation":0}\n' + b"\0" * 16 + b"x", len(HEADER), "not a newline"),
    (HEADER + b'{"outcome":0}\n' + b"\0" * 9, len(HEADER), "no score"),
    (HEADER + b'{"observation":-1}\n', len(HEADER), "number must be"),
    (HEADER + b'{"observation":1,"context":"a"}\n', len(HEADER), "exactly one key"),
    (HEADER + b'{"bogus":1}\n', len(HEADER), "unknown event"),
    (HEADER + b'{"context":"a"}', len(HEADER), "ends inside the event line"),
    (HEADER + b'{"context":"\\ud800"}\n', len(HEADER), "surrogate"),
    (HEADER + b'{"context":"a"}\n\n', len(HEADER) + 16, "not valid JSON"),
])
def test_malformed(data, offset, words):
  with pytest.raises(LogFormatError) as e:
    events(data)
  assert e.value.offset == offset
  assert words in e.value.problem
  assert f"byte {offset}" in str(e.value)


def test_error_is_sticky():
  r = pyreader.StreamReader(HEADER + b"garbage\n" + b'{"context":"a"}\n')
  with pytest.raises(LogFormatError):
    r.next_event()
  with pytest.raises(LogFormatError):
    r.next_event()


def test_header_limits_and_optional_specs():
  data = (b'{"features":[{"name":"a","type":"uint8_t","shape":[0,4]}],'
          b'"score":{"name":"s","type":"double","port":0,"shape":[]},'
          b'"advice":{"name":"d","type":"int64_t","port":0,"shape":[1]},"extra":{"k":[1,2]}}\n'
          b'{"observation":0}\n\n{"outcome":0}\n' + np.float64(2.5).tobytes() + b"\n")
  r = pyreader.StreamReader(data)
  assert r.header == [FeatureSpec("a", np.dtype(np.uint8), (0, 4), 0)]
  assert r.score.shape == () and r.advice.name == "d"
  obs, out = list(r)
  assert obs.features[0].shape == (0, 4)
  assert out.value == 2.5
