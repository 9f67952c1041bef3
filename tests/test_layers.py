"""Each package of memoryd imports only what its docstring's "May import:" line names,
and no two packages import each other, however indirectly: the docstrings are the map
of the stages, and this keeps them true."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import memoryd

ROOT = Path(memoryd.__file__).parent
PACKAGES = sorted(p.parent.name for p in ROOT.glob("*/__init__.py"))


def declared(package: str) -> set[str]:
    doc = ast.get_docstring(ast.parse((ROOT / package / "__init__.py").read_text())) or ""
    found = re.search(r"May import: (.+?)\.\s*$", doc, re.S)
    assert found, f"memoryd/{package}/__init__.py: its docstring has no 'May import:' line"
    names = " ".join(found.group(1).split())
    return set() if names == "nothing of memoryd" else set(names.split(", "))


def imported(package: str) -> set[str]:
    """The other top-level parts of memoryd (packages and modules) that the package's
    modules import, at module level or inside functions; migrations aside."""
    used: set[str] = set()
    for path in (ROOT / package).rglob("*.py"):
        if "migrations" in path.parts:
            continue
        for name in _memoryd_imports(ast.parse(path.read_text())):
            if name != package:
                used.add(name)
    return used


def _memoryd_imports(tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "memoryd":
                yield from (alias.name for alias in node.names)
            elif node.module.startswith("memoryd."):
                yield node.module.split(".")[1]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("memoryd."):
                    yield alias.name.split(".")[1]


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_imports_only_what_its_docstring_names(package: str) -> None:
    assert imported(package) <= declared(package), (
        f"memoryd/{package} imports {sorted(imported(package) - declared(package))} "
        "beyond its docstring's 'May import:' line"
    )


def test_no_packages_import_each_other_in_a_circle() -> None:
    edges = {p: imported(p) & set(PACKAGES) for p in PACKAGES}
    done: set[str] = set()

    def visit(package: str, path: list[str]) -> None:
        assert package not in path, " -> ".join([*path, package])
        if package in done:
            return
        for other in sorted(edges[package]):
            visit(other, [*path, package])
        done.add(package)

    for package in PACKAGES:
        visit(package, [])


def test_migrations_import_no_stage_code() -> None:
    """A migration runs as written forever: what it imports of memoryd is the schema's
    own helpers and the settings, never a stage's code, whose changes would rewrite it."""
    versions = ROOT / "models" / "migrations" / "versions"
    for path in sorted(versions.glob("*.py")):
        tree = ast.parse(path.read_text())
        modules = {
            node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
        } | {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        }
        ours = {m for m in modules if m == "memoryd" or m.startswith("memoryd.")}
        allowed = {m for m in ours if m.startswith(("memoryd.models", "memoryd.settings"))}
        assert ours == allowed, f"{path.name} imports {sorted(ours - allowed)}"


@pytest.mark.parametrize("folder", ["bench", "testkit"])
def test_benches_and_the_testkit_import_nothing_of_the_suite(folder: str) -> None:
    """What benches and tests both run against lives in testkit/: a bench that imports
    the suite breaks when a test is renamed."""
    for path in sorted((ROOT.parent / folder).rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            assert not any(n == "tests" or n.startswith("tests.") for n in names), path
