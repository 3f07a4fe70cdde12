"""Repository rule: the project's virtualenv as Bazel's Python, plus its headers.

Bazel 4.2.3 ignores --python_path, so we register a py_runtime toolchain that points
at the venv interpreter named by MLGO_PYTHON (written to .bazelrc.local by setup.sh).
The same interpreter tells us where the CPython, pybind11 and TensorFlow XLA AOT
runtime sources live, which we expose as cc_library targets.
"""

_PROBE = """
import json, sys, sysconfig
out = {"include": sysconfig.get_paths()["include"], "version": "%d.%d" % sys.version_info[:2]}
try:
    import pybind11
    out["pybind11"] = pybind11.get_include()
except ImportError:
    pass
try:
    import importlib.util, os
    spec = importlib.util.find_spec("tensorflow")
    if spec and spec.submodule_search_locations:
        root = list(spec.submodule_search_locations)[0]
        aot = os.path.join(root, "xla_aot_runtime_src")
        if os.path.isdir(aot):
            out["tf_aot"] = aot
            out["tf_include"] = os.path.join(root, "include")
except Exception:
    pass
print(json.dumps(out))
"""

def _impl(ctx):
    python = ctx.os.environ.get("MLGO_PYTHON", "")
    if not python:
        fail("MLGO_PYTHON is not set: run ./setup.sh (it writes .bazelrc.local) or use ./bazelw")
    res = ctx.execute([python, "-c", _PROBE])
    if res.return_code != 0:
        fail("cannot run %s: %s" % (python, res.stderr))
    info = json.decode(res.stdout.strip())
    ctx.symlink(info["include"], "python_include")
    build = [
        'package(default_visibility = ["//visibility:public"])',
        'load("@bazel_tools//tools/python:toolchain.bzl", "py_runtime_pair")',
        "",
        "py_runtime(",
        '    name = "venv_py3",',
        '    interpreter_path = "%s",' % python,
        '    python_version = "PY3",',
        ")",
        'py_runtime_pair(name = "runtime_pair", py3_runtime = ":venv_py3")',
        "toolchain(",
        '    name = "py_toolchain",',
        '    toolchain = ":runtime_pair",',
        '    toolchain_type = "@bazel_tools//tools/python:toolchain_type",',
        ")",
        "",
        "cc_library(",
        '    name = "python_headers",',
        '    hdrs = glob(["python_include/**/*.h"]),',
        '    includes = ["python_include"],',
        ")",
        'exports_files(["python_bin"])',
    ]
    ctx.file("python_bin", "#!/bin/sh\nexec %s \"$@\"\n" % python, executable = True)
    if "pybind11" in info:
        ctx.symlink(info["pybind11"], "pybind11_include")
        build += [
            "cc_library(",
            '    name = "pybind11",',
            '    hdrs = glob(["pybind11_include/**/*.h"]),',
            '    includes = ["pybind11_include"],',
            '    deps = [":python_headers"],',
            ")",
        ]
    if "tf_aot" in info:
        # Only the runtime files an XLA AOT-compiled model needs (see DESIGN.md; the
        # Eigen matmul kernels for models whose matmuls XLA does not inline);
        # compiling the whole directory takes minutes for nothing.
        ctx.symlink(info["tf_aot"], "xla_aot")
        # The runtime sources include headers that live in the pip package's include/
        # dir (tf2xla, xla, tsl, absl, Eigen, ml_dtypes): expose just those subtrees.
        ctx.symlink(info["tf_include"], "tf_include")
        build += [
            "cc_library(",
            '    name = "xla_aot_runtime",',
            "    srcs = [",
            '        "xla_aot/tensorflow/compiler/tf2xla/xla_compiled_cpu_function.cc",',
            '        "xla_aot/xla/cpu_function_runtime.cc",',
            '        "xla_aot/xla/executable_run_options.cc",',
            '        "xla_aot/xla/service/custom_call_status.cc",',
            '        "xla_aot/xla/service/cpu/runtime_single_threaded_matmul_f32.cc",',
            '        "xla_aot/xla/service/cpu/runtime_single_threaded_matmul_f64.cc",',
            "    ],",
            '    hdrs = glob(["xla_aot/**/*.h"]) + glob([',
            '        "tf_include/Eigen/**",',
            '        "tf_include/unsupported/Eigen/**",',
            '        "tf_include/absl/**",',
            '        "tf_include/ml_dtypes/**",',
            '        "tf_include/tsl/platform/**",',
            '        "tf_include/xla/*.h",',
            '        "tf_include/xla/runtime/**",',
            '        "tf_include/xla/service/*.h",',
            '        "tf_include/xla/service/cpu/*.h",',
            '        "tf_include/tensorflow/compiler/tf2xla/*.h",',
            '        "tf_include/tensorflow/core/platform/*.h",',
            '    ]),',
            '    includes = ["xla_aot", "tf_include"],',
            '    copts = ["-w"],',
            ")",
            "# The same files as plain inputs, for builds outside cc_* rules",
            "# (//llvm_patches:clang_release compiles them into libLLVM).",
            "filegroup(",
            '    name = "xla_aot_runtime_files",',
            '    srcs = [',
            '        "xla_aot/tensorflow/compiler/tf2xla/xla_compiled_cpu_function.cc",',
            '        "xla_aot/xla/cpu_function_runtime.cc",',
            '        "xla_aot/xla/executable_run_options.cc",',
            '        "xla_aot/xla/service/custom_call_status.cc",',
            '        "xla_aot/xla/service/cpu/runtime_single_threaded_matmul_f32.cc",',
            '        "xla_aot/xla/service/cpu/runtime_single_threaded_matmul_f64.cc",',
            '    ] + glob(["xla_aot/**/*.h"]) + glob([',
            '        "tf_include/Eigen/**",',
            '        "tf_include/unsupported/Eigen/**",',
            '        "tf_include/absl/**",',
            '        "tf_include/ml_dtypes/**",',
            '        "tf_include/tsl/platform/**",',
            '        "tf_include/xla/*.h",',
            '        "tf_include/xla/runtime/**",',
            '        "tf_include/xla/service/*.h",',
            '        "tf_include/xla/service/cpu/*.h",',
            '        "tf_include/tensorflow/compiler/tf2xla/*.h",',
            '        "tf_include/tensorflow/core/platform/*.h",',
            '    ]),',
            ")",
        ]
    ctx.file("BUILD", "\n".join(build) + "\n")
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name)

python_configure = repository_rule(
    implementation = _impl,
    environ = ["MLGO_PYTHON"],
    local = True,
)
