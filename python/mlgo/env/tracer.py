"""The default tracer plugin for llc, cc/regalloc_trace (located or built by
mlgo.util.compiler_plugins): `plugin_path(llvm_version)` is what `llc -load=` takes."""
from mlgo.util import compiler_plugins as plugins

PluginError = plugins.PluginError


def plugin_path(llvm_version: int = 22) -> str:
  return plugins.plugin_path(plugins.REGALLOC_TRACE, llvm_version)


def build_plugin(llvm_version: int = 22) -> str:
  return plugins.build_plugin(plugins.REGALLOC_TRACE, llvm_version)
