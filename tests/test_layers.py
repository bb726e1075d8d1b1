"""Imports point one way: io → linalg → methods → evaluate/report → api → pipeline → cli.

An AST scan of every module of the package (imports inside functions included): a module may
import from its own layer or a lower one, never from a higher one.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "fsdask"

#: module prefix → layer (longest prefix wins); lower layers must not import higher ones
LAYERS = {
    "fsdask.errors": 0,
    "fsdask._validation": 0,
    "fsdask.io": 0,
    "fsdask.results": 0,
    "fsdask.linalg": 1,
    "fsdask.cluster": 1,
    "fsdask.base": 2,
    "fsdask.checkpoint": 2,
    "fsdask.methods": 2,
    "fsdask.datasets": 2,
    "fsdask.evaluate": 3,
    "fsdask.report": 3,
    "fsdask.api": 4,
    "fsdask.testing": 4,
    "fsdask.pipeline": 5,
    "fsdask.cli": 6,
}
NAMES = {
    0: "io",
    1: "linalg",
    2: "methods",
    3: "evaluate/report",
    4: "api",
    5: "pipeline",
    6: "cli",
}


def layer(module: str) -> int | None:
    best = max(
        (p for p in LAYERS if module == p or module.startswith(p + ".")), key=len, default=None
    )
    if best is None and module.startswith("fsdask._"):
        return 0  # private helpers at the top (like _validation) sit at the bottom
    return None if best is None else LAYERS[best]


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: pathlib.Path, source: str | None = None) -> list[tuple[int, str]]:
    """(line, imported module) for every fsdask import in ``path`` (or in ``source`` as if it were there)."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(source if source is not None else path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1]
                    + ([base] if base else [])
                )
            # ``from fsdask import linalg`` names a submodule: count the submodule
            found += [
                (node.lineno, f"{base}.{a.name}" if layer(f"{base}.{a.name}") is not None else base)
                for a in node.names
            ]
    return [(line, m) for line, m in found if m == "fsdask" or m.startswith("fsdask.")]


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p != PACKAGE / "__init__.py")


def test_every_module_has_a_layer():
    assert [module_name(p) for p in MODULES if layer(module_name(p)) is None] == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_imports_point_down(path):
    me = layer(module_name(path))
    upward = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {m} ({NAMES[layer(m)]} is above {NAMES[me]})"
        for line, m in imports(path)
        if m != "fsdask" and layer(m) is not None and layer(m) > me
    ]
    assert upward == []


def test_the_scan_sees_upward_imports():
    probe = PACKAGE / "io" / "probe.py"
    source = (
        "def f():\n    from fsdask.api.select import select\n    from ..linalg import reductions\n"
    )
    up = [m for _, m in imports(probe, source) if layer(m) > layer(module_name(probe))]
    assert up == ["fsdask.api.select.select", "fsdask.linalg.reductions"]
