"""The build's Python is the pinned venv: the ML stack imports and has the pinned versions."""
import numpy
import tensorflow as tf


def test_pinned_stack():
    assert tf.__version__ == "2.15.1"
    assert numpy.__version__.startswith("1.26")
