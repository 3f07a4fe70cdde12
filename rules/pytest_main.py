"""Runs one test file under pytest inside `bazel test`, writing Bazel's JUnit XML."""
import multiprocessing.util
import os
import shutil
import sys
import tempfile

import pytest


def own_tempdir() -> str:
    """Points this test process's temporary files (pytest's tmp_path, TensorFlow's
    autograph sources, worker pools' sockets) at a directory of its own, removed when
    it ends: `bazel test //...` must not leave files in the shared /tmp. Not Bazel's
    TEST_TMPDIR: that path is too long for the Unix sockets of multiprocessing."""
    mine = tempfile.mkdtemp(prefix="mlgo-test-")
    os.environ["TMPDIR"] = mine
    tempfile.tempdir = mine
    # After multiprocessing's own exit cleanup (its forkserver dir lives in here).
    multiprocessing.util.Finalize(None, shutil.rmtree, args=(mine, True), exitpriority=-200)
    return mine


if __name__ == "__main__":
    own_tempdir()
    args = list(sys.argv[1:])
    xml = os.environ.get("XML_OUTPUT_FILE")
    if xml:
        args.append("--junitxml=" + xml)
    # Bazel's sandbox has a read-only source tree: keep pytest's cache out of it.
    args += ["-p", "no:cacheprovider", "-q"]
    sys.exit(pytest.main(args))
