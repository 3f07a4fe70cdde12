"""Measured execution at machine-basic-block grain, and the performance model built on it
(the runtime-grounded regalloc reward).

  callgrind   parses valgrind's callgrind output (--dump-instr=yes, cache and branch
              simulation) into self costs per instruction address
  bbmap       llc's basic-block address map: its own machine blocks, their addresses and
              static frequencies, from an object or a linked program
  blocks      disassembles an executable or object (llvm-objdump) into machine basic
              blocks (llc's, where the map is present) with their features, and joins a
              profile onto them: one row per executed block
  cost_model  the learned block cost model (cycles per execution) and a function's
              estimated cycles per call
  mca         llvm-mca's steady-state cycles per block: a baseline for the model
"""
