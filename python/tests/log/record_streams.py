"""Records real interactive-channel streams from clang/llc for the reader tests.

The policy answers with the compiler's default where it sends one (inlining),
the first evictable column (eviction) or the advisor's own priority-like value
(priority). Everything the compiler wrote is saved byte for byte.
"""

import os
import shutil
import subprocess
import tempfile
import threading

import numpy as np

from mlgo.log import Observation, pyreader

C_PROGRAM = r"""
static int sq(int x) { return x * x; }
static int add(int a, int b) { return sq(a) + sq(b); }
int table[64];
int f(int a) { return add(a, 1) + add(2, a); }
int g(int n) {
  int s = 0;
  for (int i = 0; i < n; i++) s += f(i) * (i & 3 ? table[i & 63] : 2);
  return s;
}
long h(long *p, long n, long a, long b, long c, long d, long e) {
  long s = 0;
  for (long i = 0; i < n; i++) {
    long t = p[i] * a + b; s += t * c - d * p[(i * 7) & 15] + e * t;
    p[(i * 3) & 15] = s ^ t; s += g((int)t) + (s >> 3) * (t << 2);
  }
  return s;
}
#define V(i) long v##i = p[i] * k + i;
#define U(i) s += v##i * p[(i + j) & 63]; v##i ^= s;
#define R(i) r += v##i;
long pressure(long *p, long k, int n) {
  V(0) V(1) V(2) V(3) V(4) V(5) V(6) V(7) V(8) V(9) V(10) V(11) V(12) V(13) V(14)
  V(15) V(16) V(17) V(18) V(19) V(20) V(21) V(22) V(23)
  long s = 0, r = 0;
  for (int j = 0; j < n; j++) {
    U(0) U(1) U(2) U(3) U(4) U(5) U(6) U(7) U(8) U(9) U(10) U(11) U(12) U(13) U(14)
    U(15) U(16) U(17) U(18) U(19) U(20) U(21) U(22) U(23)
    p[j & 63] = s;
  }
  R(0) R(1) R(2) R(3) R(4) R(5) R(6) R(7) R(8) R(9) R(10) R(11) R(12) R(13) R(14)
  R(15) R(16) R(17) R(18) R(19) R(20) R(21) R(22) R(23)
  return r + s;
}
"""


def _answer(problem, reader, ev):
  names = [f.name for f in reader.header]
  feats = dict(zip(names, ev.features))
  if problem == "inlining":
    return np.int64(feats["inlining_default"].reshape(-1)[0]).tobytes()
  if problem == "eviction":
    mask = feats["mask"].reshape(-1)
    ok = np.flatnonzero(mask[:-1])
    return np.int64(ok[0] if len(ok) else len(mask) - 1).tobytes()
  return np.float32(feats["weight"].reshape(-1)[0]).tobytes()


def record(problem, tool, out_path, workdir, timeout=60):
  """problem: inlining|eviction|priority; tool: path of clang or llc."""
  d = tempfile.mkdtemp(dir=workdir)
  os.chmod(d, 0o700)
  base = os.path.join(d, "ch")
  os.mkfifo(base + ".in")
  os.mkfifo(base + ".out")
  src = os.path.join(d, "t.c")
  with open(src, "w") as f:
    f.write(C_PROGRAM)
  if problem == "inlining":
    argv = [tool, "-Oz", "-c", src, "-o", os.path.join(d, "t.o"),
            "-mllvm", "-enable-ml-inliner=release",
            "-mllvm", "-inliner-interactive-channel-base=" + base,
            "-mllvm", "-inliner-interactive-include-default"]
  else:
    clang = os.path.join(os.path.dirname(tool), "clang")
    ll = os.path.join(d, "t.ll")
    subprocess.run([clang, "-O2", "-S", "-emit-llvm", src, "-o", ll], check=True)
    argv = [tool, "-O2", ll, "-o", os.path.join(d, "t.s")]
    if problem == "eviction":
      argv += ["-regalloc-enable-advisor=release",
               "-regalloc-evict-interactive-channel-base=" + base]
    else:
      argv += ["-regalloc-enable-priority-advisor=release",
               "-regalloc-priority-interactive-channel-base=" + base]
  proc = subprocess.Popen(argv, stderr=subprocess.PIPE)
  timer = threading.Timer(timeout, proc.kill)
  timer.start()
  decisions = 0
  try:
    inbound = open(base + ".in", "wb", buffering=0)   # the compiler opens .in first
    outbound = os.open(base + ".out", os.O_RDONLY)
    with open(out_path, "wb") as rec:
      def read1(n):
        b = os.read(outbound, n)
        rec.write(b)
        return b

      class Tee:
        pass
      tee = Tee()
      tee.read1 = read1
      reader = pyreader.StreamReader(tee)
      for ev in reader:
        if isinstance(ev, Observation):
          inbound.write(_answer(problem, reader, ev))
          decisions += 1
    inbound.close()
    os.close(outbound)
    err = proc.communicate()[1]
    if proc.returncode != 0:
      raise RuntimeError(f"{argv[0]} failed ({proc.returncode}): {err[-2000:]!r}")
  finally:
    timer.cancel()
    if proc.poll() is None:
      proc.kill()
      proc.wait()
    shutil.rmtree(d, ignore_errors=True)
  return decisions
