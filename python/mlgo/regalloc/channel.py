"""The regalloc compile loop's view of LLVM's training-log stream.

A thin adapter over the project's reader (`mlgo.log.StreamReader`, native when built)
that yields the tuples the llc loop uses; the reader never reads past the record it is
parsing, so it can sit on the FIFO while llc waits for our answer.
"""
from mlgo import log


class ChannelError(RuntimeError):
  pass


class ChannelReader:
  def __init__(self, fd: int):
    self._reader = log.StreamReader(fd)
    self.names = [spec.name for spec in self._reader.header]

  def next_event(self):
    """('context', name) | ('observation', index, {name: array}) | None at EOF."""
    ev = self._reader.next_event()
    if ev is None:
      return None
    if isinstance(ev, log.Context):
      return ("context", ev.name)
    if isinstance(ev, log.Observation):
      return ("observation", int(ev.index), dict(zip(self.names, ev.features)))
    raise ChannelError("unexpected outcome record on the interactive channel")
