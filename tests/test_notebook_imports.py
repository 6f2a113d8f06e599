"""Notebooks use only distsim's public API.

A notebook is what a learner copies. It may import a name only from
``distsim`` or from a package's ``__init__`` that lists it in ``__all__``
(``distsim.scenario``, ``distsim.views.plots``, ``distsim.real``, ...), never
from a module inside a package or an underscore name, so the internals can
move without breaking the workbook.
"""

from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(cell index, module, imported names) of every distsim import in the notebook's code cells."""
    out = []
    for i, cell in enumerate(json.loads(path.read_text())["cells"]):
        if cell["cell_type"] != "code":
            continue
        source = "\n".join(line for line in "".join(cell["source"]).splitlines() if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "distsim":
                out.append((i, node.module, [a.name for a in node.names]))
            elif isinstance(node, ast.Import):
                out += [(i, a.name, []) for a in node.names if a.name.split(".")[0] == "distsim"]
    return out


def _public(module: str, name: str | None) -> str | None:
    """Why ``module`` (and ``name`` from it) is not public API, or None."""
    mod = importlib.import_module(module)
    if not Path(mod.__file__).name == "__init__.py":
        return f"{module} is a module inside a package; import from the package"
    if name is None:
        return None
    if name.startswith("_"):
        return f"{name} is private"
    exported = getattr(mod, "__all__", None)
    if exported is None or name not in exported:
        return f"{module} does not export {name} in __all__"
    return None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_imports_only_public_names(path):
    problems = []
    for cell, module, names in _imports(path):
        for name in names or [None]:
            why = _public(module, name)
            if why:
                problems.append(f"cell {cell}: from {module} import {name}: {why}")
    assert not problems, "\n".join(problems)
