"""Default-replay report over a corpus: for every module, compile with the default policy
answering over the interactive channel and check the object against the plain compile
(inlining: byte for byte), and check that eviction/priority runs with the
default-equivalent policy complete.
"""
import concurrent.futures
import dataclasses
import filecmp
import os
import subprocess
import tempfile

from mlgo.env import core, modules as modules_lib
from mlgo.env.policies import DefaultPolicy
from mlgo.util import toolchain as toolchain_lib
from mlgo.util.progress import Progress


@dataclasses.dataclass
class ReplayReport:
  problem: str
  llvm_version: int
  modules: int = 0
  identical: int = 0          # inlining: objects byte-identical to the plain compile
  completed: int = 0          # compiles that finished ok
  decisions: int = 0
  mismatches: list = dataclasses.field(default_factory=list)
  failures: list = dataclasses.field(default_factory=list)   # (module, reason)

  def summary(self) -> str:
    head = f"{self.problem} LLVM {self.llvm_version}: {self.modules} modules, "
    if self.problem == "inlining":
      head += f"{self.identical} byte-identical, {len(self.mismatches)} different, "
    else:
      head += f"{self.completed} completed, "
    head += f"{len(self.failures)} failed, {self.decisions} decisions"
    lines = [head]
    lines += [f"  different: {m}" for m in self.mismatches[:20]]
    lines += [f"  failed: {m}: {r[:300]}" for m, r in self.failures[:20]]
    return "\n".join(lines)

  def to_json(self) -> dict:
    return dataclasses.asdict(self)


def _one(module, problem, llvm_version, timeout):
  """(ok, identical|None, decisions, reason)."""
  with tempfile.TemporaryDirectory(prefix="mlgo-replay-") as tmp:
    if problem != "inlining":
      tc = toolchain_lib.toolchain(llvm_version)
      try:
        module = modules_lib.llc_input(module, tmp, tc.clang)
      except RuntimeError as e:
        return False, None, 0, f"preparing optimized bitcode: {e}"
    out = os.path.join(tmp, "replay.o")
    res = core.compile_module(module, problem, DefaultPolicy(problem),
                              llvm_version=llvm_version, timeout=timeout, output_path=out)
    if not res.ok:
      return False, None, res.decisions, res.reason
    if problem != "inlining":
      return True, None, res.decisions, None
    ref = os.path.join(tmp, "plain.o")
    try:
      core.plain_compile(module, problem, llvm_version=llvm_version, output_path=ref,
                         timeout=timeout)
    except (subprocess.SubprocessError, OSError) as e:
      return True, False, res.decisions, f"plain compile failed: {e}"
    return True, filecmp.cmp(out, ref, shallow=False), res.decisions, None


def replay_corpus(mods, problem: str, llvm_version: int, *, jobs: int = 1,
                  timeout: float = 300.0, stream=None) -> ReplayReport:
  rep = ReplayReport(problem, llvm_version, modules=len(mods))
  prog = Progress(f"replay {problem} LLVM {llvm_version}", total=len(mods), stream=stream)
  with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(jobs, 2))) as ex:
    futs = {ex.submit(_one, m, problem, llvm_version, timeout): m for m in mods}
    for fut in concurrent.futures.as_completed(futs):
      m = futs[fut]
      ok, identical, decisions, reason = fut.result()
      rep.decisions += decisions
      if ok:
        rep.completed += 1
        if identical:
          rep.identical += 1
        elif identical is False:
          rep.mismatches.append(m.name + (f" ({reason})" if reason else ""))
      else:
        rep.failures.append((m.name, reason))
      prog.update(failed=0 if ok else 1)
  prog.close()
  rep.mismatches.sort()
  rep.failures.sort()
  return rep
