"""Small shared helpers: command-line paths, progress display, toolchain discovery."""
