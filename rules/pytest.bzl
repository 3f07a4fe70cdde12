"""py_test through pytest, so every test case lands in Bazel's JUnit XML (CI counts them)."""

def mlgo_py_test(name, srcs, deps = [], data = [], size = "small", tags = [], args = [], **kwargs):
    native.py_test(
        name = name,
        srcs = srcs + ["//rules:pytest_main.py"],
        main = "//rules:pytest_main.py",
        args = ["$(location %s)" % srcs[0]] + args,
        deps = deps + ["//python:mlgo"],
        data = data + srcs,
        size = size,
        tags = tags,
        python_version = "PY3",
        **kwargs
    )
