"""Native (C++) vs pure-Python reader: same events, same errors, on real streams
recorded from clang/llc and on thousands of corrupted variants."""

import glob
import io
import os
import random
import threading

import numpy as np
import pytest

import mlgo.log
from mlgo.log import Context, LogFormatError, Observation, Outcome, pyreader
from logtestlib import synthetic_stream
import record_streams

native = mlgo.log.native
READERS = {"python": pyreader, "native": native}
LLVM = {v: f"/usr/lib/llvm-{v}/bin" for v in (22, 19)}
RECORDINGS = [("inlining", 22, "clang"), ("inlining", 19, "clang"),
              ("eviction", 22, "llc"), ("eviction", 19, "llc"),
              ("priority", 22, "llc")]


@pytest.fixture(scope="module")
def streams(tmp_path_factory):
  """name -> bytes of real compiler streams (recorded now, plus testdata/streams)."""
  out = {}
  work = tmp_path_factory.mktemp("rec")
  for problem, version, tool in RECORDINGS:
    path = work / f"{problem}-{tool}-{version}.log"
    n = record_streams.record(problem, os.path.join(LLVM[version], tool), str(path), str(work))
    assert n > 0, f"{problem} on {tool}-{version} made no decisions"
    out[path.name] = path.read_bytes()
  srcdir = os.environ.get("TEST_SRCDIR", "")
  for p in glob.glob(os.path.join(srcdir, "*", "testdata", "streams", "*.bin")):
    with open(p, "rb") as f:
      out["testdata/" + os.path.basename(p)] = f.read()
  return out


def run(mod, data, via="bytes"):
  """(events, error offset or None) with events in a comparable form."""
  if via == "bytes":
    src = data
  elif via == "buffered":
    src = io.BufferedReader(io.BytesIO(data), buffer_size=7)
  else:
    src = io.BytesIO(data)
  r = mod.StreamReader(src)
  evs = []
  try:
    evs.append(("header", tuple(r.header), r.score, r.advice))
    while True:
      ev = r.next_event()
      if ev is None:
        return evs, None
      if isinstance(ev, Context):
        evs.append(("c", ev.name))
      elif isinstance(ev, Observation):
        evs.append(("o", ev.index, tuple((a.dtype.str, a.shape, a.tobytes()) for a in ev.features)))
      else:
        assert isinstance(ev, Outcome)
        evs.append(("r", ev.index, ev.value.dtype.str, ev.value.shape, ev.value.tobytes()))
  except LogFormatError as e:
    return evs, e.offset


def assert_same_logs(a, b):
  assert [l.name for l in a] == [l.name for l in b]
  for x, y in zip(a, b):
    assert list(x.features) == list(y.features)
    for k in x.features:
      assert x.features[k].dtype == y.features[k].dtype
      np.testing.assert_array_equal(x.features[k], y.features[k])
    np.testing.assert_array_equal(x.indices, y.indices)
    assert (x.outcomes is None) == (y.outcomes is None)
    if x.outcomes is not None:
      np.testing.assert_array_equal(x.outcomes, y.outcomes)


def test_native_is_the_default():
  assert mlgo.log.NATIVE
  assert mlgo.log.StreamReader is native.StreamReader
  assert mlgo.log.read_log is native.read_log


def test_recorded_streams_agree(streams, tmp_path):
  # Recorded now, plus the environment's committed recordings (testdata/streams).
  assert len(streams) >= len(RECORDINGS) + 6, sorted(streams)
  for name, data in streams.items():
    py_events, py_err = run(pyreader, data)
    nat_events, nat_err = run(native, data)
    assert py_err is None and nat_err is None, name
    assert py_events == nat_events, name
    assert sum(e[0] == "o" for e in nat_events) > 0
    p = tmp_path / "s.log"
    p.write_bytes(data)
    logs = native.read_log(p)
    assert_same_logs(logs, pyreader.read_log(p))
    assert_same_logs(logs, native.read_log(data))
    fd = os.open(p, os.O_RDONLY)
    try:
      assert_same_logs(logs, native.read_log(fd))
    finally:
      os.close(fd)


def test_recorded_stream_values(streams):
  inl = native.read_log(streams["inlining-clang-22.log"])
  assert [l.name for l in inl] == [""]
  assert set(np.unique(inl[0].features["inlining_default"])) <= {0, 1}
  ev = native.read_log(streams["eviction-llc-22.log"])
  assert "pressure" in [l.name for l in ev]
  press = [l for l in ev if l.name == "pressure"][0]
  assert press.features["mask"].shape == (len(press), 1, 33)
  assert press.features["mask"].dtype == np.int64
  assert press.features["progress"].dtype == np.float32
  np.testing.assert_array_equal(press.indices, np.arange(len(press)))
  r = native.StreamReader(streams["priority-llc-22.log"])
  assert [f.name for f in r.header] == ["li_size", "stage", "weight"]
  assert r.advice.name == "priority" and r.advice.dtype == np.float32


@pytest.mark.parametrize("seed", range(6))
def test_synthetic_every_dtype_agrees(seed):
  _, _, _, data = synthetic_stream(seed=seed, contexts=1 + seed, with_score=seed % 2 == 0,
                                   no_context=seed == 3)
  results = {(name, via): run(mod, data, via)
             for name, mod in READERS.items() for via in ("bytes", "buffered", "raw")}
  first = next(iter(results.values()))
  assert first[1] is None and len(first[0]) > 1
  for v in results.values():
    assert v == first
  assert_same_logs(native.read_log(data), pyreader.read_log(data))


def _mutations(rng: random.Random, base: bytes, n: int):
  hdr_end = base.index(b"\n") + 1
  tokens = [b"0", b"-1", b"1e3", b"2147483648", b"99999999999999999999", b"[1,33]",
            b"[65536,65536]", b"[2147483647,2147483647,2147483647]", b"[]", b'"x"', b"null",
            b"true", b"NaN", b"{}", b"[" * 70 + b"]" * 70, b'"\\ud800"', b"\xff", b"\n",
            b'"int64_t"', b'"uint8_t"', b'"double"', b'"int128_t"', b'{"context":"a"}\n',
            b'{"observation":0}\n', b'{"outcome":1}\n', b'"\\u00e9"', b"1" * 4301]
  for _ in range(n):
    d = bytearray(base)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
      kind = rng.randrange(7)
      pos = rng.randrange(len(d) + 1) if rng.random() < 0.5 else rng.randrange(min(hdr_end, len(d)) + 1)
      if kind == 0:
        d = d[:pos]                                   # truncation
      elif kind == 1 and d:
        d[min(pos, len(d) - 1)] ^= 1 << rng.randrange(8)  # bit flip
      elif kind == 2 and d:
        d[min(pos, len(d) - 1)] = rng.randrange(256)   # byte change
      elif kind == 3:
        d[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
      elif kind == 4:
        del d[pos:pos + rng.randrange(1, 40)]
      elif kind == 5:                                  # JSON token swap
        end = pos + rng.randrange(1, 12)
        d[pos:end] = rng.choice(tokens)
      else:                                            # duplicate a slice
        end = min(len(d), pos + rng.randrange(1, 200))
        d[pos:pos] = d[pos:end]
    yield bytes(d)


def test_corrupted_variants_agree(streams):
  rng = random.Random(1234)
  _, _, _, synth = synthetic_stream(seed=7, contexts=3, max_obs=3)
  evict = streams["eviction-llc-22.log"]
  bases = [synth, streams["inlining-clang-22.log"], streams["priority-llc-22.log"][:6000],
           evict[:evict.index(b"\n") + 1] + evict[evict.index(b"\n") + 1:][:12000]]
  counts = {"ok": 0, "error": 0}
  for bi, base in enumerate(bases):
    for k, data in enumerate(_mutations(rng, base, 1000)):
      py = run(pyreader, data)
      nat = run(native, data)
      assert py == nat, f"base {bi} variant {k}: {data[:200]!r}"
      counts["error" if py[1] is not None else "ok"] += 1
  # The mix exercises both outcomes substantially.
  assert counts["error"] > 1000 and counts["ok"] > 100, counts


@pytest.mark.parametrize("name", ["python", "native"])
def test_fifo_streaming(name):
  """Each record is returned as soon as it is complete; native releases the GIL."""
  mod = READERS[name]
  rfd, wfd = os.pipe()
  header = b'{"features":[{"name":"a","type":"int64_t","port":0,"shape":[2]}]}\n'
  r = mod.StreamReader(rfd)
  got = []

  def writer():
    os.write(wfd, header + b'{"context":""}\n')
    for i in range(3):
      os.write(wfd, b'{"observation":%d}\n' % i + np.array([i, 10], np.int64).tobytes() + b"\n")
      ack.acquire()  # wait until the reader saw this record, like the compiler
    os.close(wfd)

  ack = threading.Semaphore(0)
  t = threading.Thread(target=writer, daemon=True)
  t.start()  # the reader blocks in read() while this thread needs the GIL to write
  assert r.next_event() == Context("")
  for i in range(3):
    ev = r.next_event()
    got.append(ev.features[0].tolist())
    ack.release()
  assert r.next_event() is None
  t.join(5)
  os.close(rfd)
  assert got == [[0, 10], [1, 10], [2, 10]]


HEADER = b'{"features":[{"name":"a","type":"int64_t","port":0,"shape":[2]}]}\n'
MALFORMED = [
    (b"", 0, "empty"),
    (b'{"features":[]', 0, "ends inside the header"),
    (b'{"features":[{"name":"a","type":"int128_t","port":0,"shape":[1]}]}\n', 0, "unsupported type"),
    (b'{"features":[{"name":"a","type":"float","port":0,"shape":[-1]}]}\n', 0, "bad dimension"),
    (b'{"features":[{"name":"a","type":"float","shape":[2147483647,2147483647,2147483647,2147483647]}]}\n', 0, "too large"),
    (b'{"features":[{"name":"a","type":"float","port":0,"shape":[1e0]}]}\n', 0, "bad dimension"),
    (b'{"features":[{"name":"a","type":"float","port":0,"shape":[false]}]}\n', 0, "bad dimension"),
    (b'{"features":[{"name":"a","type":"float","port":0.5,"shape":[1]}]}\n', 0, "port"),
    (b'{"features":[{"name":"a","type":"float","shape":[1]},{"name":"a","type":"float","shape":[1]}]}\n', 0, "duplicate feature"),
    (b'{"features":[{"name":"a","type":"uint8_t","shape":[1073741824]},{"name":"b","type":"uint8_t","shape":[1]}]}\n', 0, "an observation would take"),
    (b'{"features":[],"x":Infinity}\n', 0, "not valid JSON"),
    (b'{"features":[],"x":' + b"[" * 64 + b"]" * 64 + b"}\n", 0, "not valid JSON"),
    (b'{"features":[],"x":' + b"1" * 4301 + b"}\n", 0, "not valid JSON"),
    (b'{"features":[],"x":"\xc0\xaf"}\n', 0, "not valid JSON"),
    (b'{"features":[],"features":[]}\n', 0, "not valid JSON"),
    (b'{"features":[]}\n{"context":"a"}\n\n', 32, "not valid JSON"),
    (HEADER + b'{"observation":0}\n' + b"\0" * 16, len(HEADER), "ends inside observation 0"),
    (HEADER + b'{"observation":0}\n' + b"\0" * 16 + b"x", len(HEADER), "not a newline"),
    (HEADER + b'{"outcome":0}\n' + b"\0" * 9, len(HEADER), "no score"),
    (HEADER + b'{"observation":-1}\n', len(HEADER), "number must be"),
    (HEADER + b'{"observation":9223372036854775808}\n', len(HEADER), "number must be"),
    (HEADER + b'{"observation":1,"context":"a"}\n', len(HEADER), "exactly one key"),
    (HEADER + b'{"bogus":1}\n', len(HEADER), "unknown event"),
    (HEADER + b'{"context":"a"}', len(HEADER), "ends inside the event line"),
    (HEADER + b'{"context":"\\udc00"}\n', len(HEADER), "surrogate"),
    (HEADER + b'{"context":"' + b"x" * (1 << 20) + b'"}\n', len(HEADER), "longer than"),
]


@pytest.mark.parametrize("name", ["python", "native"])
@pytest.mark.parametrize("data,offset,words", MALFORMED)
def test_malformed(name, data, offset, words):
  with pytest.raises(LogFormatError) as e:
    list(READERS[name].StreamReader(data))
  assert e.value.offset == offset
  assert words in e.value.problem, e.value.problem
  assert f"byte {offset}" in str(e.value)
  with pytest.raises(LogFormatError):  # read_log raises the same
    READERS[name].read_log(data)


@pytest.mark.parametrize("name", ["python", "native"])
def test_accepted_edge_cases(name):
  header = (b' {"features" : [{"name":"\\u00e9\\ud83d\\ude00","type":"uint16_t",'
            b'"shape":[0,2147483647]},{"name":"b","type":"int8_t","shape":[],'
            b'"port":-2147483648}],"x":[' + b"1" * 4300 + b',-0,1.5e-3,null,'
            b'{"y":"\\ud800"}],"score":{"name":"s","type":"uint64_t","shape":[1]}}\r\n')
  data = (header + b'{"observation":5}\n\xff\n' + b'{ "outcome" : 5 }\n' + b"\xff" * 8 + b"\n")
  r = READERS[name].StreamReader(data)
  assert [f.name for f in r.header] == ["\u00e9\U0001F600", "b"]
  assert r.header[0].shape == (0, 2147483647) and r.header[1].port == -2147483648
  obs, out = list(r)
  assert obs.index == 5 and obs.features[0].shape == (0, 2147483647)
  assert obs.features[1] == -1 and obs.features[1].dtype == np.int8
  assert out.value.tolist() == [2**64 - 1]
  logs = READERS[name].read_log(data)
  assert logs[0].name == "" and logs[0].outcomes.shape == (1, 1)


def test_native_sources_and_types(tmp_path):
  _, _, _, data = synthetic_stream(seed=9)
  p = tmp_path / "s.log"
  p.write_bytes(data)
  ref = run(pyreader, data)
  with open(p, "rb", buffering=0) as f:   # raw FileIO: read() once per call
    assert run(native, f.read(), "bytes") == ref
  with open(p, "rb") as f:
    r = native.StreamReader(f)
    assert len(list(r)) == len(ref[0]) - 1
  assert_same_logs(native.read_log(bytearray(data)), pyreader.read_log(data))
  assert_same_logs(native.read_log(memoryview(data)), pyreader.read_log(data))
  with pytest.raises(TypeError):
    native.StreamReader(3.5)
  with pytest.raises(OSError):
    native.read_log(str(tmp_path / "missing.log"))


def test_native_reader_shared_by_threads(streams):
  """Concurrent next_event calls on one native reader: every event exactly once."""
  data = streams["eviction-llc-22.log"]
  expected = sum(1 for _ in pyreader.StreamReader(data))
  r = native.StreamReader(data)
  counts = [0] * 4

  def work(k):
    while r.next_event() is not None:
      counts[k] += 1
  threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
  for t in threads:
    t.start()
  for t in threads:
    t.join(30)
  assert sum(counts) == expected
