"""The package layout the wheel and the Runtime bundle are built from: every package folder is
declared (a subpackage left out of pyproject.toml would be missing from the bundle), the
import-linter contracts that `make test` runs are the ones documented in the README and place
every subpackage, no module imports itself back through others (a cycle, even one hidden in a
function or under ``TYPE_CHECKING``), and no production module is over 600 lines. And the
suite's own layout: tests in folders that mirror the packages, each a package, their helpers in
``tests.support``, and no test that turns a broken import of the project into a skip."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from tests.support.paths import ROOT

TOP = ("policy", "compiler", "servers", "seif", "grammar")


def _config() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_every_package_folder_is_declared() -> None:
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in TOP
        for init in (ROOT / top).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    declared = set(_config()["tool"]["setuptools"]["packages"])  # type: ignore[index]
    assert found <= declared
    for data in declared - found:  # a folder of package data only (the approvers' page)
        folder = ROOT.joinpath(*data.split("."))
        assert folder.is_dir() and not list(folder.glob("*.py")), data


def test_the_layer_contracts_name_every_part_of_servers() -> None:
    contracts = _config()["tool"]["importlinter"]["contracts"]  # type: ignore[index]
    inner = next(c for c in contracts if c.get("containers") == ["servers"])
    named = {part.strip() for layer in inner["layers"] for part in layer.split("|")}
    parts = {p.name for p in (ROOT / "servers").iterdir() if (p / "__init__.py").is_file()}
    assert named == parts
    assert not [p.name for p in (ROOT / "servers").glob("*.py") if p.name != "__init__.py"]


# ---------------------------------------------------------------- no import cycle


def modules(root: Path, tops: tuple[str, ...]) -> dict[str, tuple[Path, bool]]:
    """Every module of the packages ``tops`` under ``root``: its file, and whether it is a
    package (the copied executor starters are files to copy, not modules)."""
    found = {}
    for top in tops:
        for path in (root / top).rglob("*.py"):
            if "__pycache__" in path.parts or "starters" in path.parts:
                continue
            parts = list(path.relative_to(root).with_suffix("").parts)
            package = parts[-1] == "__init__"
            found[".".join(parts[:-1] if package else parts)] = (path, package)
    return found


def _imported(node: ast.AST, package: str) -> list[str]:
    """The names an import statement imports, absolute (``from . import x`` resolved): each
    ``from a import b`` is ``a.b``, the module ``a.b`` or the name ``b`` of the module ``a``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        parts = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*parts, *([node.module] if node.module else [])])
    return [f"{base}.{alias.name}" for alias in node.names]


def import_graph(root: Path, tops: tuple[str, ...]) -> dict[str, set[str]]:
    """Module -> the modules of ``tops`` it imports: every import statement counts, at the top,
    inside a function or under ``if TYPE_CHECKING``, as a cycle hides in any of them."""
    known = modules(root, tops)

    def owner(name: str) -> str | None:  # `a.b.name`: the module `a.b`
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, (path, is_package) in known.items():
        package = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for imported in _imported(node, package):
                target = owner(imported)
                if target is not None and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


PACKAGES = ("policy", "compiler", "servers", "seif")


def test_no_import_cycle_anywhere() -> None:
    graph = import_graph(ROOT, PACKAGES)
    assert len(graph) > 200
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_planted_cycle(tmp_path: Path) -> None:
    """Not vacuous: a cycle through a function-local import and a `TYPE_CHECKING` block, and a
    relative import, are found; a module that only imports into the cycle is not part of it."""
    package = tmp_path / "planted"
    package.mkdir()
    files = {
        "__init__.py": "",
        "a.py": "from planted.b import thing\n",
        "b.py": "def thing():\n    from planted import c\n    return c\n",
        "c.py": (
            "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
            "    from planted.d import other\n"
        ),
        "d.py": "from . import a\n\nother = 1\n",
        "e.py": "import planted.a\n",
    }
    for name, text in files.items():
        (package / name).write_text(text, encoding="utf-8")
    graph = import_graph(tmp_path, ("planted",))
    assert cycles(graph) == [["planted.a", "planted.b", "planted.c", "planted.d"]]
    (package / "d.py").write_text("other = 1\n", encoding="utf-8")
    assert cycles(import_graph(tmp_path, ("planted",))) == []


# ---------------------------------------------------------------- module size

MAX_LINES = 600


def test_no_production_module_is_over_600_lines() -> None:
    """A module that grows past 600 lines holds more than one part: split it where the parts
    meet (the copied executor starters are files to copy, not modules)."""
    known = modules(ROOT, PACKAGES)
    sizes = {
        name: len(path.read_text(encoding="utf-8").splitlines())
        for name, (path, _) in known.items()
    }
    assert len(sizes) > 200
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_the_layer_contracts_name_every_subpackage() -> None:
    """A new subpackage of policy, compiler or seif takes its place in its package's layers."""
    contracts = _config()["tool"]["importlinter"]["contracts"]  # type: ignore[index]
    for top in ("policy", "compiler", "seif"):
        inner = next(c for c in contracts if c.get("containers") == [top])
        named = {part.strip() for layer in inner["layers"] for part in layer.split("|")}
        parts = {p.name for p in (ROOT / top).iterdir() if (p / "__init__.py").is_file()}
        assert parts <= named, top


# ---------------------------------------------------------------- the tests' own layout

PROJECT = ("policy", "compiler", "servers", "seif", "bench", "grammar", "tests")


def _is_project(name: str) -> bool:
    return name.partition(".")[0] in PROJECT


def _skip_or_stand_in(handler: ast.ExceptHandler) -> bool:
    """``except ImportError`` or ``except ModuleNotFoundError`` (alone or in a tuple)."""
    caught = handler.type
    names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
    return any(
        isinstance(n, ast.Name) and n.id in {"ImportError", "ModuleNotFoundError"} for n in names
    )


def hidden_project_imports(source: str) -> list[str]:
    """The project's modules a test module imports only if they import: ``importorskip`` of
    one, or an import of one in a ``try`` whose ``except ImportError`` skips or stands in."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and (
            getattr(node.func, "attr", None) == "importorskip"
            or getattr(node.func, "id", None) == "importorskip"
        ):
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found += [first.value] if _is_project(first.value) else []
        if isinstance(node, ast.Try) and any(_skip_or_stand_in(h) for h in node.handlers):
            for inner in (n for statement in node.body for n in ast.walk(statement)):
                if isinstance(inner, ast.Import):
                    found += [a.name for a in inner.names if _is_project(a.name)]
                elif isinstance(inner, ast.ImportFrom) and not inner.level and inner.module:
                    found += [inner.module] if _is_project(inner.module) else []
    return found


def _test_modules() -> list[Path]:
    """The suite's Python files (not those of the npm packages ``tests/node`` installs)."""
    skipped = {"__pycache__", "node_modules"}
    return [p for p in (ROOT / "tests").rglob("*.py") if not skipped & set(p.parts)]


def test_no_test_skips_or_stands_in_for_a_broken_import_of_the_project() -> None:
    """A broken module of the project fails the tests that import it: never a skip."""
    found = {
        str(path.relative_to(ROOT)): hidden
        for path in _test_modules()
        if (hidden := hidden_project_imports(path.read_text(encoding="utf-8")))
    }
    assert found == {}


def test_the_hidden_import_finder_finds_planted_ones() -> None:
    """Not vacuous: both forms are found, an optional third-party package is not."""
    source = (
        "import pytest\n"
        'parse = pytest.importorskip("compiler.seif.parse")\n'
        'uvloop = pytest.importorskip("uvloop")\n'
        "try:\n    from policy.cel.values import Uint\nexcept ImportError:\n    Uint = int\n"
        "try:\n    import resource\nexcept ImportError:\n    resource = None\n"
    )
    assert sorted(hidden_project_imports(source)) == ["compiler.seif.parse", "policy.cel.values"]


def test_tests_mirror_the_packages_and_their_helpers_are_one_package() -> None:
    """Every folder of tests is a package (so two test files never clash by name in pytest's
    eyes), every test file has a name no other has (docs/security.md names them by file), and
    a module that is not a test is a helper of ``tests.support`` (or a conftest)."""
    folders = {path.parent for path in _test_modules()}
    assert [str(f) for f in folders if not (f / "__init__.py").is_file()] == []
    names = [p.name for p in _test_modules() if p.name.startswith("test_")]
    assert len(names) > 100
    assert sorted({n for n in names if names.count(n) > 1}) == []
    support = ROOT / "tests" / "support"
    helpers = [
        str(p.relative_to(ROOT))
        for p in _test_modules()
        if not p.name.startswith("test_")
        and p.name not in {"__init__.py", "conftest.py"}
        and p.parent != support
    ]
    assert helpers == []
    mirrored = {f.relative_to(ROOT / "tests").parts[0] for f in folders if f != ROOT / "tests"}
    assert mirrored <= {*PROJECT, "docs", "sdk", "support"} - {"tests", "grammar"}
