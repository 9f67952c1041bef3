"""`import memoryd` loads its public names when first used, and every one of them."""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import memoryd
from testkit.workers import REPO_ROOT


def test_every_public_name_resolves_to_its_home() -> None:
    assert sorted(memoryd.__all__) == sorted(memoryd._HOMES)
    for name in memoryd.__all__:
        value = getattr(memoryd, name)
        assert value.__module__.startswith(memoryd._HOMES[name]), name
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        memoryd.Nope  # noqa: B018


def test_a_worker_or_a_command_does_not_load_the_clients_it_never_calls() -> None:
    loaded = subprocess.run(
        [sys.executable, "-c", "import memoryd.worker, sys; print(sorted(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "'memoryd.async_client'" not in loaded and "'openai'" not in loaded


# The packages that only their extra's install (of the same name) loads: their imports
# may come from it.
EXTRA_HOMES = frozenset({"server", "mcp"})


def test_what_the_package_imports_on_load_is_a_dependency_it_declares() -> None:
    """`pip install memoryd` must be enough for the client, the worker and the CLI, and
    `memoryd[server]` for the server: whatever a module loads, through memoryd's own
    modules too, comes from a requirement of that install, not from what a requirement
    happens to pull in today (the openai SDK stopped bringing httpx once) nor from the
    dev extra the suite installs."""
    providers = metadata.packages_distributions()
    graph = _load_graph(Path(memoryd.__file__).parent)
    missing = set()
    for module in graph:
        home = module.split(".")[1] if "." in module else None
        extra = home if home in EXTRA_HOMES else None
        declared = _requirements(None) | (_requirements(extra) if extra else frozenset())
        missing |= {
            f"{name} ({module})"
            for name in _loaded_with(graph, module)
            if name not in sys.stdlib_module_names
            and not declared & {_normalized(d) for d in providers.get(name, [])}
        }
    assert not missing, f"not in the install's requirements: {sorted(missing)}"


def _load_graph(package: Path) -> dict[str, set[str]]:
    """Each memoryd module's name, and the full names its top-level imports load."""
    graph = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        graph[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = _imported_on_load(path)
    return graph


def _loaded_with(graph: dict[str, set[str]], module: str) -> set[str]:
    """The other distributions' top-level modules that loading `module` loads: its own
    imports and, through every memoryd module and package it loads, theirs."""
    seen, todo, found = set(), [module], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for name in graph.get(current, set()):
            parts = name.split(".")
            if parts[0] == "memoryd":  # the module and the packages above it
                todo += [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
            else:
                found.add(parts[0])
    return found


@functools.cache
def _requirements(extra: str | None) -> frozenset[str]:
    """The distributions `pip install memoryd` brings, or those its `extra` adds (with
    the extras it names), as pyproject.toml says (not an installed copy's metadata,
    which may be older)."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    listed = project["dependencies"] if extra is None else project["optional-dependencies"][extra]
    found = set()
    for requirement in listed:
        name, _, extras = re.split(r"[<>=!~; ]", requirement)[0].partition("[")
        if _normalized(name) == "memoryd":
            for other in extras.rstrip("]").split(","):
                found |= _requirements(other.strip())
        else:
            found.add(_normalized(name))
    return frozenset(found)


def _imported_on_load(path: Path) -> set[str]:
    """Full names of the module-level imports. Those nested in any block (functions,
    classes, `if TYPE_CHECKING`, try/except) are left out: they load only with the
    optional feature they serve."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from package import module` loads the module: both names are kept, and
            # a name that is no module is simply not found in the graph.
            names |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return names


def _normalized(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()
