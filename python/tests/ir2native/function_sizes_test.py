"""mlgo.util.toolchain.function_sizes: per-function native size from an object's symbol
table, on objects clang-22 writes."""
import subprocess

import pytest

from mlgo.util import toolchain

import i2ntestlib as lib


def _object(tmp_path, source, *flags):
  tc = toolchain.toolchain(lib.LLVM)
  driver = tc.clangxx if source.endswith(".cpp") else tc.clang
  obj = tmp_path / "out.o"
  subprocess.run([driver, *flags, "-c", lib.program(source), "-o", str(obj)], check=True,
                 capture_output=True, timeout=120)
  return str(obj)


def test_sizes_of_calls_at_oz_add_up_to_text_size(tmp_path):
  obj = _object(tmp_path, "calls.c", "-Oz")
  sizes = toolchain.function_sizes(obj)
  # The external functions of calls.c survive; the static helpers are inlined and gone
  # (mix, square and clamp have no caller left).
  assert {"vec_push", "energy", "window_max", "run"} <= set(sizes)
  assert not {"mix", "square", "clamp"} & set(sizes)
  assert all(isinstance(v, int) and v > 0 for v in sizes.values())
  # -Oz aligns functions to 1 byte: no padding, so the symbols cover .text exactly.
  assert sum(sizes.values()) == toolchain.text_size(obj)


def test_function_sections_and_padding(tmp_path):
  # One .text.<name> section per function: all counted; at -O2 functions are aligned,
  # so the symbols cover at most the sections.
  obj = _object(tmp_path, "calls.c", "-O2", "-ffunction-sections")
  sizes = toolchain.function_sizes(obj)
  assert {"vec_push", "energy", "window_max", "run"} <= set(sizes)
  assert 0 < sum(sizes.values()) <= toolchain.text_size(obj)
  # C++: comdat functions (.text._Z...) are counted under their mangled names.
  obj = _object(tmp_path, "catch_rethrow.cpp", "-Oz")
  sizes = toolchain.function_sizes(obj)
  assert any(n.startswith("_Z") for n in sizes), sizes
  assert sum(sizes.values()) == toolchain.text_size(obj)


def test_data_symbols_are_not_functions(tmp_path):
  src = tmp_path / "d.c"
  src.write_text("int table[100] = {1};\nconst char msg[] = \"hello\";\n"
                 "int get(int i) { return table[i] + msg[i % 5]; }\n")
  obj = tmp_path / "d.o"
  subprocess.run([toolchain.toolchain(lib.LLVM).clang, "-O1", "-c", str(src), "-o",
                  str(obj)], check=True, capture_output=True, timeout=60)
  sizes = toolchain.function_sizes(str(obj))
  assert list(sizes) == ["get"]
  assert sizes["get"] == toolchain.text_size(str(obj))


def test_non_elf_input_names_the_file(tmp_path):
  bad = tmp_path / "garbage.o"
  bad.write_bytes(b"this is not an object file" * 10)
  with pytest.raises(ValueError, match="garbage.o") as e:
    toolchain.function_sizes(str(bad))
  assert str(bad) in str(e.value)
  short = tmp_path / "short.o"
  short.write_bytes(b"\x7fELF")
  with pytest.raises(ValueError, match="short.o"):
    toolchain.function_sizes(str(short))


def test_truncated_object_is_an_error_not_a_crash(tmp_path):
  obj = _object(tmp_path, "calls.c", "-Oz")
  data = open(obj, "rb").read()
  cut = tmp_path / "cut.o"
  cut.write_bytes(data[:len(data) // 2])   # the section table is at the end
  with pytest.raises(ValueError, match="cut.o"):
    toolchain.function_sizes(str(cut))
