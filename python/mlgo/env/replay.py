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

from mlgo.env import core, inline_remarks, modules as modules_lib
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
      head += f"{self.identical} byte-identical, {len(self.mismatches)} different"
      if self.mismatches:
        head += (f" ({len(self.mismatches) - len(self.unexplained)} of them only at call "
                 "sites clang's ML advisor decides without asking the channel)")
      head += ", "
    else:
      head += f"{self.completed} completed, "
    head += f"{len(self.failures)} failed, {self.decisions} decisions"
    lines = [head]
    lines += [f"  different: {m}" for m in self.mismatches[:20]]
    lines += [f"  failed: {m}: {r[:300]}" for m, r in self.failures[:20]]
    return "\n".join(lines)

  @property
  def unexplained(self) -> list:
    """Mismatches not explained by call sites the channel never sees."""
    return [m for m in self.mismatches if inline_remarks.UNREACHABLE not in m]

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
    if filecmp.cmp(out, ref, shallow=False):
      return True, True, res.decisions, None
    return True, False, res.decisions, explain_mismatch(module, llvm_version, timeout, tmp)


def explain_mismatch(module, llvm_version: int, timeout: float, workdir: str) -> str:
  """Why a default replay differs from the plain compile, from the inliner's remarks of
  both compiles (see mlgo.env.inline_remarks)."""
  files = {k: os.path.join(workdir, f"{k}.remarks.yaml") for k in ("plain", "replay")}
  flags = lambda k: inline_remarks.clang_flags(files[k])
  try:
    res = core.compile_module(module, "inlining", DefaultPolicy("inlining"),
                              llvm_version=llvm_version, timeout=timeout,
                              output_path=os.path.join(workdir, "r.o"),
                              extra_flags=flags("replay"))
    if not res.ok:
      return f"no explanation: replay with remarks failed: {res.reason}"
    core.plain_compile(module, "inlining", llvm_version=llvm_version, timeout=timeout,
                       output_path=os.path.join(workdir, "p.o"), extra_flags=flags("plain"))
    exp = inline_remarks.explain(inline_remarks.parse(files["plain"]),
                                 inline_remarks.parse(files["replay"]), res.decisions)
  except (subprocess.SubprocessError, OSError, inline_remarks.RemarksError) as e:
    return f"no explanation: {e}"
  return exp.summary()


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
