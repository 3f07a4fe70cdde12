"""A real multi-node Ray cluster on this machine's loopback, for tests and benchmarks.

`ray start --head` plus one `ray start --address` process per extra node, each its own
raylet with its own CPUs, exactly as on separate machines (minus the network). Node
failures are injected by killing a node's raylet (`kill_node`).
"""
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from mlgo.util import procfs


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _kill_all(pids, sig):
  for pid in pids:
    try:
      os.kill(pid, sig)
    except OSError:
      pass


def _ray_cli() -> list:
  exe = pathlib.Path(sys.executable).with_name("ray")
  if exe.exists():
    return [str(exe)]
  return [sys.executable, "-c", "import sys; from ray.scripts.scripts import main; "
          "sys.argv[0] = 'ray'; main()"]


class LocalCluster:
  """Head (`head_cpus`) + one node per entry of `node_cpus`, on 127.0.0.1.

  Fast failure detection (0.5 s heartbeats) so a killed node is noticed in seconds.
  Use as a context manager; `address` is what `--ray_address` takes.
  """

  def __init__(self, head_cpus: int = 1, node_cpus=(1,), object_store_mb: int = 150,
               env: dict | None = None):
    self.head_cpus = head_cpus
    self.node_cpus = list(node_cpus)
    self.object_store = str(object_store_mb * 1024 * 1024)
    # Short path: Ray's unix sockets live under it (108-byte limit).
    self.tmp = tempfile.mkdtemp(prefix="mlgo-ray-", dir="/tmp")
    self.port = _free_port()
    self.address = f"127.0.0.1:{self.port}"
    self.node_ports = []
    # Loopback only: no token authentication between its processes.
    self.env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled",
                    RAY_health_check_period_ms="500", RAY_health_check_timeout_ms="1000",
                    RAY_health_check_failure_threshold="3")
    self.env.pop("RAY_ADDRESS", None)
    self.env.update(env or {})
    # Every process of the cluster inherits this mark (agents rename their cmdline).
    self.env["MLGO_RAY_CLUSTER"] = self.tmp

  def _ray(self, *args):
    r = subprocess.run(_ray_cli() + list(args), env=self.env, capture_output=True, text=True,
                       timeout=120)
    if r.returncode != 0:
      raise RuntimeError(f"ray {' '.join(args)} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")

  def start(self):
    try:
      self._start()
    except BaseException:
      self.stop()   # a half-started cluster is not left running
      raise
    return self

  def _start(self):
    self._ray("start", "--head", f"--port={self.port}", "--node-ip-address=127.0.0.1",
              f"--num-cpus={self.head_cpus}", "--include-dashboard=false",
              f"--temp-dir={self.tmp}", f"--object-store-memory={self.object_store}",
              "--disable-usage-stats")
    for cpus in self.node_cpus:
      self.add_node(cpus)

  def add_node(self, cpus: int = 1) -> int:
    """Starts one more node; returns its node-manager port (its handle for kill_node)."""
    port = _free_port()
    self._ray("start", f"--address={self.address}", "--node-ip-address=127.0.0.1",
              f"--num-cpus={cpus}", f"--node-manager-port={port}",
              f"--object-store-memory={self.object_store}", "--disable-usage-stats")
    self.node_ports.append(port)
    return port

  def warm(self, seconds: float = 1.5, timeout: float = 120.0):
    """Starts a worker on every node (connects this process): rounds of sleeping tasks,
    two per CPU, until every node has run one, so work is spread over all nodes from the
    first item on instead of piling onto a node whose worker happened to start first.
    Returns the node labels seen."""
    from mlgo.workers import ray_pool, testing  # pylint: disable=import-outside-toplevel
    ray = ray_pool.connect(self.address)
    want = sum(1 for n in ray.nodes() if n["Alive"])
    pool = ray_pool.RayPool()
    seen, end = set(), time.monotonic() + timeout
    while len(seen) < want and time.monotonic() < end:
      for _ in range(2 * pool.num_workers):
        pool.submit(testing.sleep_then, seconds, None)
      seen |= {r.node for r in pool.results()}
    return seen

  def _raylet_pid(self, port: int) -> int | None:
    for d in os.listdir("/proc"):
      if not d.isdigit():
        continue
      try:
        cmd = open(f"/proc/{d}/cmdline", "rb").read().split(b"\0")
      except OSError:
        continue
      if cmd and cmd[0].endswith(b"raylet") and f"--node_manager_port={port}".encode() in cmd:
        return int(d)
    return None

  def kill_node(self, port: int | None = None):
    """The node dies: SIGKILL to a non-head node's raylet (default: the first extra
    node), then to the processes it started (agents, workers)."""
    port = port or self.node_ports[0]
    pid = self._raylet_pid(port)
    if pid is None:
      raise RuntimeError(f"no raylet with node manager port {port}")
    tree = procfs.with_descendants([pid])
    os.kill(pid, signal.SIGKILL)
    _kill_all(tree, signal.SIGKILL)

  def _pids(self):
    """Processes of this cluster only (marked in their environment); not `ray stop`,
    which would stop every Ray cluster on the machine."""
    mark = f"MLGO_RAY_CLUSTER={self.tmp}".encode()
    for d in os.listdir("/proc"):
      if d.isdigit() and int(d) != os.getpid():
        try:
          if mark in open(f"/proc/{d}/environ", "rb").read().split(b"\0"):
            yield int(d)
        except OSError:
          pass

  def stop(self):
    # The marked processes and everything they started (Ray's agents drop the mark).
    tree = procfs.with_descendants(self._pids())
    _kill_all(tree, signal.SIGTERM)
    end = time.monotonic() + 5
    while time.monotonic() < end and procfs.alive(tree):
      time.sleep(0.1)
    _kill_all(tree, signal.SIGKILL)
    shutil.rmtree(self.tmp, ignore_errors=True)

  def __enter__(self):
    return self.start()

  def __exit__(self, *exc):
    self.stop()
