"""release_prefix: Debian's clang-22/llc-22 with a relinked libLLVM holding mlgo models.

    load("//llvm_patches:release.bzl", "release_prefix")
    release_prefix(
        name = "clang_release",
        inliner_model = "//models/inlining_oz_small:saved_policy",        # or None
        evict_model = "//models/regalloc_eviction:saved_policy",   # or None
    )

Output: the directory NAME/ (bin/clang, bin/clang++, bin/llc, bin/opt,
lib/libLLVM.so.22.1, ...; see release_prefix.py). The models are AOT-compiled by
xla_aot_model (rules/aot.bzl) under LLVM's class names (llvm::InlinerSizeModel,
llvm::RegAllocEvictModel), i.e. the same saved_model_cli call as the plugin's and the
advisor server's, only the class name differs.
"""

load("//rules:aot.bzl", "xla_aot_model")

def _dir_of(files, suffix):
    for f in files:
        if f.path.endswith(suffix):
            return f.path[:-len(suffix)]
    fail("no file ending in %s" % suffix)

def _impl(ctx):
    out = ctx.actions.declare_directory(ctx.attr.name)
    args = ctx.actions.args()
    args.add("build")
    args.add("--out", out.path)
    args.add("--pins", ctx.file.pins.path)
    src_files = ctx.files.sources
    args.add("--sources", _dir_of(src_files, "llvm/lib/Analysis/MLInlineAdvisor.cpp"))
    xla = ctx.files.xla_runtime
    xla_dir = _dir_of(xla, "xla_aot/xla/cpu_function_runtime.cc")
    args.add("--xla_runtime", xla_dir + "xla_aot")
    args.add("--tf_include", xla_dir + "tf_include")
    inputs = src_files + xla + [ctx.file.pins, ctx.file.installed_versions]
    for flag, files in (("--inliner_aot", ctx.files.inliner_aot), ("--evict_aot", ctx.files.evict_aot)):
        if files:
            args.add(flag, _dir_of(files, "/policy.h"))
            inputs += files
    ctx.actions.run(
        executable = ctx.executable._tool,
        arguments = [args],
        inputs = inputs,
        outputs = [out],
        mnemonic = "ReleasePrefix",
        progress_message = "Relinking libLLVM with the mlgo models into %s" % out.short_path,
        # Reads Debian's archives under /usr/lib/llvm-22 and keeps compiled objects in
        # $MLGO_HOME/release_prefix (so a fresh output base relinks in seconds).
        execution_requirements = {"no-sandbox": "1", "no-remote": "1"},
        use_default_shell_env = True,
    )
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

_release_prefix = rule(
    implementation = _impl,
    attrs = {
        "sources": attr.label(default = "@debian_llvm22//:advisor_sources", allow_files = True),
        "installed_versions": attr.label(
            default = "@debian_llvm22//:installed_versions.txt",
            allow_single_file = True,
        ),
        "pins": attr.label(default = "//llvm_patches:debian_pins.json", allow_single_file = True),
        "xla_runtime": attr.label(default = "@local_python//:xla_aot_runtime_files", allow_files = True),
        "inliner_aot": attr.label(allow_files = True),
        "evict_aot": attr.label(allow_files = True),
        "_tool": attr.label(
            default = "//llvm_patches:release_prefix",
            executable = True,
            cfg = "host",
        ),
    },
)

def release_prefix(name, inliner_model = None, evict_model = None, **kwargs):
    """NAME: the prefix directory; NAME_inliner_model / NAME_evict_model: the AOT models."""
    extra = {}
    if inliner_model:
        xla_aot_model(
            name = name + "_inliner_model",
            saved_model = inliner_model,
            cpp_class = "llvm::InlinerSizeModel",
            problem = "inlining",
            **kwargs
        )
        extra["inliner_aot"] = ":%s_inliner_model_aot" % name
    if evict_model:
        xla_aot_model(
            name = name + "_evict_model",
            saved_model = evict_model,
            cpp_class = "llvm::RegAllocEvictModel",
            problem = "regalloc_eviction",
            **kwargs
        )
        extra["evict_aot"] = ":%s_evict_model_aot" % name
    _release_prefix(name = name, **dict(extra, **kwargs))
