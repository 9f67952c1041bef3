"""`import memoryd` loads its public names when first used, and every one of them."""

from __future__ import annotations

import ast
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


# The packages that only an extra's install loads: their imports may come from it.
EXTRA_HOMES = {"server": "server", "mcp": "mcp"}


def test_what_the_package_imports_on_load_is_a_dependency_it_declares() -> None:
    """`pip install memoryd` must be enough for the client, the worker and the CLI, and
    `memoryd[server]` for the server: a module imported at the top of one of memoryd's
    modules comes from a requirement of that install, not from whatever a requirement
    happens to pull in today (the openai SDK stopped bringing httpx once) nor from the
    dev extra the suite installs."""
    providers = metadata.packages_distributions()
    package = Path(memoryd.__file__).parent
    missing = set()
    for path in package.rglob("*.py"):
        home = path.relative_to(package).parts[0]
        extra = EXTRA_HOMES.get(home)
        declared = _requirements(None) | (_requirements(extra) if extra else set())
        missing |= {
            f"{name} ({path.relative_to(package)})"
            for name in _imported_on_load(path)
            if name not in sys.stdlib_module_names
            and name != "memoryd"
            and not declared & {_normalized(d) for d in providers.get(name, [])}
        }
    assert not missing, f"not in the install's requirements: {sorted(missing)}"


def _requirements(extra: str | None) -> set[str]:
    """The distributions `pip install memoryd` brings, or those its `extra` adds, as
    pyproject.toml says (not an installed copy's metadata, which may be older)."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    listed = project["dependencies"] if extra is None else project["optional-dependencies"][extra]
    return {_normalized(re.split(r"[\[<>=!~; ]", requirement)[0]) for requirement in listed}


def _imported_on_load(path: Path) -> set[str]:
    """Top-level names of the module-level imports: those inside functions, under
    TYPE_CHECKING or in try/except load only with an optional feature."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _normalized(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()
