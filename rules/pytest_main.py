"""Runs one test file under pytest inside `bazel test`, writing Bazel's JUnit XML."""
import os
import sys

import pytest

if __name__ == "__main__":
    args = list(sys.argv[1:])
    xml = os.environ.get("XML_OUTPUT_FILE")
    if xml:
        args.append("--junitxml=" + xml)
    # Bazel's sandbox has a read-only source tree: keep pytest's cache out of it.
    args += ["-p", "no:cacheprovider", "-q"]
    sys.exit(pytest.main(args))
