"""Counts passed and failed test cases in the JUnit XML of the given Bazel test targets.

usage: count_tests.py TESTLOGS_DIR //pkg:target ...   (a target with no XML counts as failed)
"""
import pathlib
import sys
import xml.etree.ElementTree as ET

passed = failed = 0
logs = pathlib.Path(sys.argv[1])
for target in sys.argv[2:]:
  pkg, _, name = target.lstrip("/").partition(":")
  xml = logs / pkg / name / "test.xml"
  if not xml.exists():
    failed += 1
    continue
  try:
    root = ET.parse(xml).getroot()
  except ET.ParseError:
    failed += 1
    continue
  for case in root.iter("testcase"):
    if case.find("failure") is not None or case.find("error") is not None:
      failed += 1
    elif case.find("skipped") is not None or case.get("status") == "notrun":
      continue
    else:
      passed += 1
  # A test binary that crashed before writing cases: Bazel writes a suite with an error.
  if root.find(".//testcase") is None and root.get("errors", "0") not in ("0", ""):
    failed += 1
print(passed, failed)
