"""What one or more probe chains have made so far, read from their dirs without touching
them (a running chain is fine): each measured policy's training-split figure, the figure
over the modules fine-tuning never trains on, the CPU-hours, the kept policy; with
--plot, all chains on one PNG.

  bazel run //tools:chain_report -- DIR [DIR ...] [--plot=PNG] [--target=-5.83] [--budget=9.75]
      [--largest=N]
--largest=N adds, per chain, its N largest training modules' change under each policy
(a module held from fine-tuning is marked *): whether the few modules that carry the
byte totals move steadily from round to round or swing.
"""
import argparse
import pathlib
import sys

from mlgo.util.cli import user_path


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("chains", nargs="+", help="probe_chain output dirs")
  ap.add_argument("--plot", help="write the comparison plot here (PNG)")
  ap.add_argument("--target", type=float, help="a training-split figure to draw (%%)")
  ap.add_argument("--budget", type=float, help="a CPU-hour budget to draw")
  ap.add_argument("--largest", type=int, default=0,
                  help="also each policy's change on the N largest training modules")
  a = ap.parse_args(argv)
  if a.largest < 0:
    ap.error(f"--largest={a.largest}: the number of modules must be >= 0")
  from mlgo.training import probe_chain  # pylint: disable=import-outside-toplevel
  chains = {}
  for c in a.chains:
    d = user_path(c)
    try:
      data = probe_chain.chain_report(d)
    except (FileNotFoundError, ValueError) as e:
      print(f"chain_report: {e}", file=sys.stderr)
      return 2
    label = pathlib.Path(d).name
    chains[label] = data
    total = data.get("cpu_hours")
    run = data.get("running")
    state = (f"ended at {total:.2f} CPU-h, kept {data['selected']}" if data.get("selected")
             else "not ended" + (f" (last seen in stage {run['stage']})" if run else ""))
    print(f"== {label} ({d}): {state}")
    if data.get("config", {}).get("defer"):  # every policy below leaves these to clang
      print(f"  deferral from the start: {data['config']['defer']}")
    for line in probe_chain.policy_lines(data):
      print(f"  {line}")
    if a.largest > 0:
      try:
        print(largest_table(probe_chain.largest_modules(d, data, a.largest)))
      except FileNotFoundError as e:   # a chain cut before its default stage ended
        print(f"chain_report: {d}: no module sizes yet ({e})", file=sys.stderr)
        return 2
  if a.plot:
    probe_chain.compare_plot(chains, user_path(a.plot), a.target, a.budget)
    print(f"wrote {a.plot}")
  return 0


def largest_table(rows) -> str:
  """The modules as rows, the policies as columns (change %, "-" where not measured)."""
  names = list(dict.fromkeys(k for *_, changes in rows for k in changes))
  short = [n.replace("round-", "r") for n in names]
  width = [max(7, len(n)) for n in short]
  head = f"  {'module (* held from fine-tuning)':44s} {'bytes':>9s} " + " ".join(
      f"{n:>{w}s}" for n, w in zip(short, width))
  lines = [head]
  for m, dft, held, changes in rows:
    cells = " ".join(f"{changes[n]:+{w}.1f}" if n in changes else f"{'-':>{w}s}"
                     for n, w in zip(names, width))
    name = m if len(m) <= 43 else "..." + m[-40:]
    lines.append(f"  {('*' if held else ' ') + name:44s} {dft:9.0f} {cells}")
  return "\n".join(lines)


if __name__ == "__main__":
  sys.exit(main())
