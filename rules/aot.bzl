"""Release-mode build rules: XLA AOT policies, the inline advisor plugin, the advisor server.

    load("//rules:aot.bzl", "xla_aot_model", "inline_advisor_plugin", "advisor_server",
         "tiny_policy")

    # A SavedModel checked into the repo (any files of it; one must be saved_model.pb)...
    xla_aot_model(name = "inlining_oz_model",
                  saved_model = glob(["saved_policy/**"]))
    # ...or one produced by another rule (e.g. tiny_policy below).
    inline_advisor_plugin(name = "plugin_inlining_oz", model = ":inlining_oz_model")
    advisor_server(name = "server_eviction", model = ":eviction_model")

xla_aot_model runs `saved_model_cli aot_compile_cpu` (the venv's, via the mlgo.export.aot
tool) as a genrule and wraps policy.h/.o/_metadata.o plus the generated `mlgo_model.h`
(the model's input/output table) with the XLA AOT runtime in a cc_library.
"""

_SAVED_MODEL_FILES = [
    "saved_model.pb",
    "fingerprint.pb",
    "variables/variables.index",
    "variables/variables.data-00000-of-00001",
]

def tiny_policy(name, problem, seed = 0, drop_feature = "", **kwargs):
    """A small random-weight policy dir (policy.json, weights.npz, saved_policy/).

    Outputs NAME/policy.json, NAME/weights.npz and NAME/saved_policy/*; pass the target
    as `saved_model` of xla_aot_model. drop_feature builds a mismatching policy (tests).
    """
    outs = [name + "/policy.json", name + "/weights.npz"]
    outs += [name + "/saved_policy/" + f for f in _SAVED_MODEL_FILES]
    native.genrule(
        name = name,
        outs = outs,
        cmd = ("$(location //cc/aot:tiny_policy) --problem %s --seed %d --out_dir $(RULEDIR)/%s" %
               (problem, seed, name)) + (" --drop_feature " + drop_feature if drop_feature else ""),
        tools = ["//cc/aot:tiny_policy"],
        **kwargs
    )

def xla_aot_model(name, saved_model, cpp_class = "mlgo::Policy", problem = "", **kwargs):
    """cc_library NAME: the AOT-compiled policy + XLA runtime; header "mlgo_model.h".

    saved_model: label(s) whose files include the SavedModel's saved_model.pb (a glob of
    a source directory, or a rule like tiny_policy whose outputs contain one).
    """
    srcs = saved_model if type(saved_model) == "list" else [saved_model]
    outs = [name + "/" + f for f in ["policy.h", "policy.o", "policy_metadata.o", "mlgo_model.h"]]
    native.genrule(
        name = name + "_aot",
        srcs = srcs,
        outs = outs,
        cmd = ("$(location //cc/aot:aot_compile) --saved_model_files '$(SRCS)' " +
               "--out_dir $(RULEDIR)/%s --cpp_class %s --problem '%s'") % (name, cpp_class, problem),
        tools = ["//cc/aot:aot_compile"],
        **kwargs
    )
    native.cc_library(
        name = name,
        srcs = [name + "/policy.o", name + "/policy_metadata.o"],
        hdrs = [name + "/policy.h", name + "/mlgo_model.h"],
        includes = [name],
        deps = ["@local_python//:xla_aot_runtime"],
        linkstatic = True,
        **kwargs
    )

def inline_advisor_plugin(name, model, llvm_version = 22, **kwargs):
    """NAME.so (alias NAME): LLVM pass plugin for clang/opt of `llvm_version`.

    Use: clang-22 -Oz -fpass-plugin=bazel-bin/.../NAME.so ...
    """
    native.cc_binary(
        name = name + ".so",
        srcs = [
            "//cc/inline_plugin:advisor_plugin.h",
            "//cc/inline_plugin:context_features.h",
            "//cc/inline_plugin:inline_plugin.cc",
        ],
        deps = [model, "@llvm%d//:headers" % llvm_version],
        linkshared = True,
        # Optimized whatever the compilation mode: this code runs inside every compile.
        copts = ["-O2", "-fvisibility=hidden", "-fvisibility-inlines-hidden", "-w"],
        # LLVM symbols come from the compiler's own libLLVM (same soname).
        linkopts = [
            "-L/usr/lib/llvm-%d/lib" % llvm_version,
            "-lLLVM",
            "-Wl,-z,defs",
            "-Wl,-rpath,/usr/lib/llvm-%d/lib" % llvm_version,
        ],
        **kwargs
    )
    native.alias(name = name, actual = ":" + name + ".so", **kwargs)

def advisor_server(name, model, **kwargs):
    """NAME: native interactive-channel server for the policy in `model`.

    Compiles //cc/advisor_server's main.cc and server.cc against the model's mlgo_model.h
    and links //cc/log_reader (the channel's stream reader).
    """
    native.cc_binary(
        name = name,
        srcs = [
            "//cc/advisor_server:main.cc",
            "//cc/advisor_server:server.cc",
            "//cc/advisor_server:server.h",
        ],
        deps = [model, "//cc/log_reader"],
        copts = ["-O2", "-w"],
        **kwargs
    )
