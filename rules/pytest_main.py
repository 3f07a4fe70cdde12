"""Runs one test file under pytest inside `bazel test`, writing Bazel's JUnit XML."""
import os
import sys
import tempfile

import pytest

from mlgo.util.files import private_tempdir

if __name__ == "__main__":
    # Every test process's temporary files (pytest's tmp_path, TensorFlow's autograph
    # sources, worker pools' sockets) go to a dir of its own in the system temp dir, removed
    # at exit: `bazel test //...` must not leave files in the shared /tmp. Not Bazel's
    # TEST_TMPDIR: that path is too long for the Unix sockets of multiprocessing.
    private_tempdir(root=tempfile.gettempdir(), prefix="mlgo-test-")
    args = list(sys.argv[1:])
    xml = os.environ.get("XML_OUTPUT_FILE")
    if xml:
        args.append("--junitxml=" + xml)
    # Bazel's sandbox has a read-only source tree: keep pytest's cache out of it.
    args += ["-p", "no:cacheprovider", "-q"]
    sys.exit(pytest.main(args))
