"""The package's structure, by AST scans of every module (imports inside functions included).

Imports point one way: io → linalg → methods → evaluate/report → api → pipeline → cli; a
module may import from its own layer or a lower one, never from a higher one.  Issue 39's
doors are checked below the layer test: no import circle; the io sub-layers; no private name
imported from another module; ``Execution`` and checkpoints created in ``fitting.py`` only;
URL helpers in ``io/location.py`` only; no function over 80 lines where the doors are; no
``isinstance(X, da.Array)`` in the methods; every registered estimator in the shared suite
and in ``check_estimator``.
"""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "fsdask"

#: module prefix → layer (longest prefix wins); lower layers must not import higher ones
LAYERS = {
    "fsdask.errors": 0,
    "fsdask.version": 0,
    "fsdask._validation": 0,
    "fsdask.io": 0,
    "fsdask.results": 0,
    "fsdask.linalg": 1,
    "fsdask.cluster": 1,
    "fsdask.base": 2,
    "fsdask.fitting": 2,
    "fsdask.checkpoint": 2,
    "fsdask.methods": 2,
    "fsdask.datasets": 2,
    "fsdask.stability": 2,
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


# ---------------------------------------------------------------- issue 39: the doors
#
# Each scan below returns its violations as "path:line what" strings, so a failing test
# prints the whole list.

ALL_MODULES = sorted(PACKAGE.rglob("*.py"))
MODULE_NAMES = {module_name(p) for p in ALL_MODULES}


def where(path: pathlib.Path, line: int) -> str:
    return f"{path.relative_to(PACKAGE.parent)}:{line}"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def walk(node: ast.AST):
    """``ast.walk`` in source order, skipping the bodies of ``if TYPE_CHECKING:``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for other in child.orelse:
                yield other
                yield from walk(other)
            continue
        yield child
        yield from walk(child)


_TREES: dict[pathlib.Path, ast.Module] = {}


def tree(path: pathlib.Path) -> ast.Module:
    if path not in _TREES:
        _TREES[path] = ast.parse(path.read_text(), str(path))
    return _TREES[path]


def owning_module(dotted: str) -> str | None:
    """The longest prefix of ``dotted`` that is a module of the package."""
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        if ".".join(parts[:k]) in MODULE_NAMES:
            return ".".join(parts[:k])
    return None


def resolved_imports(path: pathlib.Path, source: str | None = None):
    """(line, module, name) for every fsdask import of ``path``, ``TYPE_CHECKING`` aside.

    ``module`` is a real module of the package; ``name`` is the imported name when it is
    not itself a module (``from fsdask.x import f`` → ("fsdask.x", "f")), else None.
    """
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    root = ast.parse(source, str(path)) if source is not None else tree(path)
    out = []
    for node in walk(root):
        if isinstance(node, ast.Import):
            for a in node.names:
                mod = owning_module(a.name)
                if mod is not None:
                    out.append((node.lineno, mod, None))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = package.split(".")
                base = ".".join(pkg[: len(pkg) - node.level + 1] + ([base] if base else []))
            for a in node.names:
                if f"{base}.{a.name}" in MODULE_NAMES:
                    out.append((node.lineno, f"{base}.{a.name}", None))
                elif owning_module(base) is not None:
                    out.append((node.lineno, owning_module(base), a.name))
    return out


# ---- (a) no import circle, module granularity, imports inside functions included
def import_graph() -> dict[str, dict[str, list[str]]]:
    """module → imported module → ["path:line", ...]."""
    graph: dict[str, dict[str, list[str]]] = {}
    for path in ALL_MODULES:
        me = module_name(path)
        edges = graph.setdefault(me, {})
        for line, mod, _ in resolved_imports(path):
            for target in (*enclosing_packages(mod, me), mod):
                sites = edges.setdefault(target, []) if target != me else None
                if sites is not None and where(path, line) not in sites:
                    sites.append(where(path, line))
    return graph


def enclosing_packages(mod: str, me: str) -> list[str]:
    """The packages whose ``__init__`` importing ``mod`` runs first, from outside them.

    ``import fsdask.io.location`` from ``fsdask.results`` executes ``fsdask/io/__init__.py``
    before ``location``: an import circle through a package's re-exports is a circle too
    (``fsdask`` itself resolves its names lazily and is left out).
    """
    parts = mod.split(".")
    packages = [".".join(parts[:i]) for i in range(2, len(parts))]
    return [p for p in packages if not (me == p or me.startswith(p + "."))]


def circles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def circle_violations(graph) -> list[str]:
    out = []
    for comp in circles(graph):
        edges = [f"{site} {a} → {b}" for a in comp for b in comp for site in graph[a].get(b, [])]
        out.append(f"circle {' ↔ '.join(comp)}: " + "; ".join(sorted(edges)))
    return out


def test_no_import_circle():
    assert circle_violations(import_graph()) == []


def test_the_circle_scan_sees_a_circle():
    graph = {"a": {"b": ["a.py:1"]}, "b": {"c": ["b.py:2"]}, "c": {"a": ["c.py:3"]}, "d": {}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circle_violations(graph)[0].startswith("circle a ↔ b ↔ c: a.py:1 a → b")


# ---- (b) the io sub-layers: module prefix → layer; a lower layer never imports a higher one
IO_LAYERS = {
    "fsdask.io.icechunk": 0,  # Icechunk repositories: URLs, snapshots, commits (below location)
    "fsdask.io.location": 0,
    "fsdask.io.layout": 0,  # what a finished output holds (store listing, file sidecar)
    "fsdask.io.outputs": 0,  # the publish rule's old names, thin calls to Location
    "fsdask.io.options": 0,
    "fsdask.io.secrets": 0,
    "fsdask.io.scratch": 0,
    "fsdask.io.guard": 0,
    "fsdask.io.blocks": 0,
    "fsdask.io.store": 1,
    "fsdask.io.foreign": 2,
    "fsdask.io.anndata": 2,
    "fsdask.io.formats": 2,
    "fsdask.io.rechunk": 2,
    "fsdask.io.open": 3,
    "fsdask.io.anndata_write": 3,
    "fsdask.io.writeback": 3,  # a selection written into an AnnData-on-Zarr store in place
    "fsdask.io.ingest": 4,
    "fsdask.io": 5,  # the package face (io/__init__.py): re-exports, imported by nothing in io
}


def io_layer(module: str) -> int | None:
    best = max(
        (p for p in IO_LAYERS if module == p or module.startswith(p + ".")), key=len, default=None
    )
    return None if best is None else IO_LAYERS[best]


def io_violations() -> list[str]:
    out = []
    for path in ALL_MODULES:
        me = module_name(path)
        if not me.startswith("fsdask.io."):
            continue
        mine = io_layer(me)
        seen: set[str] = set()
        if mine is None or me == "fsdask.io":
            continue
        if mine == IO_LAYERS["fsdask.io"]:
            out.append(f"{where(path, 1)} {me} has no io sub-layer (add it to IO_LAYERS)")
            continue
        for line, mod, _ in resolved_imports(path):
            other = io_layer(mod)
            if other is not None and other > mine and where(path, line) not in seen:
                seen.add(where(path, line))
                out.append(f"{where(path, line)} {me} (io layer {mine}) imports {mod} ({other})")
    return out


def test_io_sublayers():
    assert io_violations() == []


# ---- (c) api < pipeline < cli is part of LAYERS above (test_imports_point_down)


# ---- (d) no private name imported from another fsdask module
def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def private_import_violations(path: pathlib.Path, source: str | None = None) -> list[str]:
    me = module_name(path)
    root = ast.parse(source, str(path)) if source is not None else tree(path)
    out = []
    for line, mod, name in resolved_imports(path, source):
        if name is not None and _private(name) and mod != me:
            out.append(f"{where(path, line)} imports {name} from {mod}")
    # ``import fsdask.x as m`` / ``from fsdask import x``, then ``m._y`` or ``fsdask.x._y``
    aliases: dict[str, str] = {}
    for node in walk(root):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "fsdask":
                    aliases[a.asname or a.name.split(".")[0]] = (
                        a.name if a.asname else a.name.split(".")[0]
                    )
    for _line, mod, name in resolved_imports(path, source):
        if name is None:
            # a module bound to a name: ``from fsdask import x`` or ``from . import x``
            aliases.setdefault(mod.rsplit(".", 1)[-1], mod)
    for node in walk(root):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            head = _dotted(node.value)
            if head is None:
                continue
            first, _, rest = head.partition(".")
            if first not in aliases:
                continue
            target = aliases[first] + (f".{rest}" if rest else "")
            if (
                target in MODULE_NAMES
                and target != me
                and f"{target}.{node.attr}" not in MODULE_NAMES
            ):
                out.append(f"{where(path, node.lineno)} uses {target}.{node.attr}")
    return out


def test_no_private_name_imported_from_another_module():
    found = [v for p in ALL_MODULES for v in private_import_violations(p)]
    assert found == []


def test_the_private_scan_sees_private_names():
    probe = PACKAGE / "methods" / "probe.py"
    source = (
        "from fsdask.base import _top, Selector\n"
        "from fsdask import _blocks\n"
        "def f():\n"
        "    from fsdask.linalg import execution\n"
        "    return execution._budget, _blocks.blocks\n"
    )
    found = private_import_violations(probe, source)
    assert [v.split(" ", 1)[1] for v in found] == [
        "imports _top from fsdask.base",
        "uses fsdask.linalg.execution._budget",
    ]


# ---- (e) Execution and checkpoint objects are created in fitting.py only
FITTING = "fsdask.fitting"
#: calls that create checkpoint objects (fsdask/checkpoint.py's own definitions aside)
CHECKPOINT_FACTORIES = {"for_fit", "Checkpoint", "Slot", "slot", "_NoSlot", "_NoCheckpoint"}


def creation_violations() -> list[str]:
    out = []
    for path in ALL_MODULES:
        me = module_name(path)
        if me == FITTING:
            continue
        for node in walk(tree(path)):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = (
                f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            )
            if name == "Execution":
                out.append(f"{where(path, node.lineno)} builds Execution(")
            elif name in CHECKPOINT_FACTORIES and me != "fsdask.checkpoint":
                out.append(f"{where(path, node.lineno)} creates a checkpoint object ({name}()")
    return out


def test_execution_and_checkpoints_created_in_fitting_only():
    assert creation_violations() == []


# ---- (f) URL helpers live in io/location.py only
URL_HELPER = re.compile(r"^(_?is_local|_?is_remote|_exists|_local|_fs|_get_fs)$")
LOCATION = "fsdask.io.location"


def url_helper_violations() -> list[str]:
    return [
        f"{where(path, node.lineno)} defines {node.name}()"
        for path in ALL_MODULES
        if module_name(path) != LOCATION
        for node in walk(tree(path))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and URL_HELPER.match(node.name)
    ]


def test_url_helpers_only_in_location():
    assert url_helper_violations() == []


# ---- (g) no function over 80 lines where the doors are (numba kernels exempt)
MAX_LINES = 80
SHORT_FUNCTIONS_IN = ("methods", "io", "evaluate", "api", "pipeline")
NUMBA = {"njit", "jit", "vectorize", "guvectorize", "stencil"}


def _numba(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
        if name in NUMBA:
            return True
    return False


def long_function_violations() -> list[str]:
    out = []
    for sub in SHORT_FUNCTIONS_IN:
        for path in sorted((PACKAGE / sub).rglob("*.py")):
            for node in walk(tree(path)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _numba(node):
                    n = node.end_lineno - node.lineno + 1
                    # the numpydoc docstring (Parameters, Returns, Examples) is not code
                    if ast.get_docstring(node) is not None:
                        n -= node.body[0].end_lineno - node.body[0].lineno + 1
                    if n > MAX_LINES:
                        out.append(f"{where(path, node.lineno)} {node.name} has {n} lines")
    return out


def test_no_function_over_80_lines():
    assert long_function_violations() == []


# ---- (h) methods never branch on the array kind
def _names_dask_array(node: ast.expr, array_aliases: set[str]) -> bool:
    if isinstance(node, ast.Tuple):
        return any(_names_dask_array(e, array_aliases) for e in node.elts)
    dotted = _dotted(node) or ""
    return dotted in array_aliases or (
        dotted.endswith(".Array") and dotted.rsplit(".", 1)[0] in {"da", "dask.array"}
    )


def isinstance_violations(paths=None) -> list[str]:
    out = []
    for path in paths or sorted((PACKAGE / "methods").rglob("*.py")):
        root = tree(path)
        # ``from dask.array import Array`` (as A): those names are dask's array class too
        aliases = {
            a.asname or a.name
            for node in walk(root)
            if isinstance(node, ast.ImportFrom) and node.module in ("dask.array", "dask.array.core")
            for a in node.names
            if a.name == "Array"
        }
        for node in walk(root):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "isinstance"
                and len(node.args) == 2
                and _names_dask_array(node.args[1], aliases)
            ):
                out.append(f"{where(path, node.lineno)} {ast.unparse(node)}")
    return out


def test_methods_never_test_for_dask_arrays():
    assert isinstance_violations() == []


# ---- (i) every registered estimator is in the shared suite and in check_estimator
TESTS = pathlib.Path(__file__).resolve().parent


def _registry_entries():
    import importlib

    from fsdask.methods import REGISTRY

    for name, (mod, cls, fixed) in REGISTRY.items():
        yield name, getattr(importlib.import_module(mod), cls), fixed


def _matches(est, klass, fixed) -> bool:
    params = est.get_params()
    return type(est) is klass and all(params.get(k) == v for k, v in fixed.items())


def _suite_estimators() -> list:
    """An estimator from every collected ``SelectorChecks`` subclass of the test modules."""
    import importlib

    from fsdask.testing import SelectorChecks

    for path in sorted(TESTS.glob("test_*.py")):
        if "SelectorChecks" in path.read_text():
            importlib.import_module(path.stem)  # tests/ is on sys.path (pytest's rootdir)

    def subclasses(c):
        for s in c.__subclasses__():
            yield s
            yield from subclasses(s)

    return [
        c().make_estimator() for c in subclasses(SelectorChecks) if c.__name__.startswith("Test")
    ]


def registry_coverage_violations() -> list[str]:
    import importlib

    suite = _suite_estimators()
    checked = [make() for make in importlib.import_module("test_estimators").ESTIMATORS.values()]
    out = []
    for name, klass, fixed in _registry_entries():
        if not any(_matches(e, klass, fixed) for e in suite):
            out.append(f"REGISTRY[{name!r}] has no SelectorChecks subclass in tests/")
        if not any(_matches(e, klass, fixed) for e in checked):
            out.append(
                f"REGISTRY[{name!r}] has no check_estimator case in tests/test_estimators.py"
            )
    return out


def test_every_registry_entry_is_in_the_shared_suite_and_check_estimator():
    assert registry_coverage_violations() == []


def test_the_scans_see_violations():
    root = ast.parse(
        "import dask.array as da\n"
        "def _exists(p):\n"
        "    return isinstance(p, (int, da.Array))\n"
        "def exists(p):\n"
        "    return isinstance(p, int)\n"
    )
    defs = [n for n in walk(root) if isinstance(n, ast.FunctionDef)]
    assert [n.name for n in defs if URL_HELPER.match(n.name)] == ["_exists"]
    calls = [n for n in walk(root) if isinstance(n, ast.Call)]
    assert [_names_dask_array(c.args[1], set()) for c in calls] == [True, False]
    source = (
        "if TYPE_CHECKING:\n    from fsdask.cli import main\nfrom fsdask.errors import InputError\n"
    )
    found = resolved_imports(PACKAGE / "io" / "probe.py", source)
    assert [m for _, m, _ in found] == ["fsdask.errors"]
    kernel = ast.parse("@numba.njit(cache=True)\ndef k(x):\n    return x\n").body[0]
    assert _numba(kernel)


# ---- scikit-learn's private parameter validation is imported in one module only
PARAM_VALIDATION_DOOR = "fsdask._validation"


def param_validation_violations() -> list[str]:
    out = []
    for path in ALL_MODULES:
        if module_name(path) == PARAM_VALIDATION_DOOR:
            continue
        for node in walk(tree(path)):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            if any(n.startswith("sklearn.utils._param_validation") for n in names):
                out.append(f"{where(path, node.lineno)} imports sklearn.utils._param_validation")
    return out


def test_sklearn_param_validation_imported_in_one_module():
    assert param_validation_violations() == []


def exception_class_violations() -> list[str]:
    """Exception and warning classes defined outside fsdask/errors.py."""
    out = []
    for path in ALL_MODULES:
        if module_name(path) == "fsdask.errors":
            continue
        for node in ast.walk(tree(path)):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {_dotted(b) or "" for b in node.bases}
            if any(b.split(".")[-1].endswith(("Error", "Exception", "Warning")) for b in bases):
                out.append(f"{where(path, node.lineno)} defines {node.name}")
    return out


def test_exception_classes_live_in_errors():
    assert exception_class_violations() == []
