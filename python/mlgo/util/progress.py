"""A one-line console progress display for long jobs (modules done, rates, extras)."""
import sys
import time


class Progress:
  """Prints `label: done/total (failed) rate eta extra` at most every `interval` s.

  On a terminal it redraws one line; in a log (CI, pipes) it prints a new line each
  interval so progress is still visible without flooding the output.
  """

  def __init__(self, label: str, total: int, interval: float = 2.0, stream=None):
    self.label = label
    self.total = total
    self.done = 0
    self.failed = 0
    self.extra = ""
    self.interval = interval
    self.stream = stream or sys.stderr
    self.start = time.monotonic()
    self._last = 0.0
    self._tty = hasattr(self.stream, "isatty") and self.stream.isatty()
    self.nodes = {}   # where results came from (worker-pool node label) -> count

  def node_rates(self) -> dict:
    """node -> results per second since the start (per-node throughput)."""
    elapsed = max(time.monotonic() - self.start, 1e-9)
    return {n: c / elapsed for n, c in self.nodes.items()}

  def update(self, done: int = 1, failed: int = 0, extra: str | None = None,
             node: str | None = None):
    if node is not None:
      self.nodes[node] = self.nodes.get(node, 0) + done
    self.done += done
    self.failed += failed
    if extra is not None:
      self.extra = extra
    now = time.monotonic()
    if now - self._last >= self.interval or self.done >= self.total:
      self._last = now
      self._print(final=False)

  def line(self) -> str:
    elapsed = time.monotonic() - self.start
    rate = self.done / elapsed if elapsed > 0 else 0.0
    eta = (self.total - self.done) / rate if rate > 0 else float("nan")
    s = (f"{self.label}: {self.done}/{self.total} done, {self.failed} failed, "
         f"{rate:.1f}/s, {elapsed:.0f}s elapsed")
    if self.done < self.total and rate > 0:
      s += f", ~{eta:.0f}s left"
    if self.extra:
      s += f", {self.extra}"
    if len(self.nodes) > 1:   # a cluster: per-node throughput
      s += ", nodes " + " ".join(f"{n} {r:.1f}/s" for n, r in sorted(self.node_rates().items()))
    return s

  def _print(self, final: bool):
    if self._tty:
      self.stream.write("\r\033[K" + self.line() + ("\n" if final else ""))
    else:
      self.stream.write(self.line() + "\n")
    self.stream.flush()

  def close(self):
    self._print(final=True)
