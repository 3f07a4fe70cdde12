"""Formatting of regalloc evaluation summaries (the summary line is the last line)."""
from mlgo.regalloc.evaluate import format_report  # noqa: F401
