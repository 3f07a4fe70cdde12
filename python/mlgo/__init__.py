"""mlgo: train machine-learned optimization policies for stock LLVM."""
import os

# A policy in the compile loop answers one decision at a time. numpy's OpenBLAS would run
# each tiny matrix product on a thread per core and keep those threads spinning, taking
# the cores the compilers need (README, "One BLAS thread"). One thread unless the user
# chose otherwise; it must be set before numpy is first imported, which an `import mlgo`
# at the top of a tool or worker does. TensorFlow keeps its own thread pools.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
