"""Measured execution at machine-basic-block grain, for performance models (issue:
a runtime-grounded regalloc reward).

  callgrind  parses valgrind's callgrind output (--dump-instr=yes, cache and branch
             simulation) into self costs per instruction address
  blocks     disassembles an executable (llvm-objdump) into machine basic blocks with
             their features (instruction mix, loads/stores, stack spills/reloads, calls)
             and joins a profile onto them: one row per executed block
"""
