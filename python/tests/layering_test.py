"""The package's architecture, checked: each subpackage imports only layers below it, so
the import graph has no cycle and the policy-dir contract sits at the ground floor
(evaluation, export and the environment never import training)."""
import ast
import pathlib

import mlgo

# Lowest first; a package may import only packages listed before it.
LAYERS = ["util", "log", "workers", "corpus", "policy", "profiles", "problems", "env", "ir2native",
          "credit", "evaluation", "export", "training"]


def _imports(path: pathlib.Path):
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mlgo"):
      parts = node.module.split(".")
      yield from ([parts[1]] if len(parts) > 1 else [a.name for a in node.names])
    elif isinstance(node, ast.Import):
      yield from (a.name.split(".")[1] for a in node.names if a.name.startswith("mlgo."))


def test_every_import_goes_down():
  root = pathlib.Path(mlgo.__file__).parent
  packages = {p.name for p in root.iterdir() if (p / "__init__.py").exists()}
  assert packages == set(LAYERS), "a new subpackage needs its place in LAYERS"
  upward = []
  for f in sorted(root.rglob("*.py")):
    rel = f.relative_to(root).parts
    if len(rel) < 2:
      continue
    mine = LAYERS.index(rel[0])
    for target in set(_imports(f)):
      if target != rel[0] and target in LAYERS and LAYERS.index(target) > mine:
        upward.append(f"{'/'.join(rel)} imports mlgo.{target}")
  assert not upward, upward
