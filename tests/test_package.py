"""`import memoryd` loads its public names when first used, and every one of them."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import memoryd


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


# What the [server] and [mcp] extras bring is imported by these packages alone.
EXTRA_HOMES = ("server", "mcp")


def test_what_the_package_imports_on_load_is_a_dependency_it_declares() -> None:
    """`pip install memoryd` must be enough for the client, the worker and the CLI: a
    module imported at the top of a core module comes from a base requirement, not from
    whatever a requirement happens to pull in today (the openai SDK stopped bringing
    httpx once) nor from the dev extra the suite installs."""
    declared = {
        _normalized(re.split(r"[\[<>=!~; ]", requirement)[0])
        for requirement in metadata.requires("memoryd") or []
        if "extra ==" not in requirement
    }
    providers = metadata.packages_distributions()
    package = Path(memoryd.__file__).parent
    missing = {
        f"{name} ({path.relative_to(package)})"
        for path in package.rglob("*.py")
        if path.relative_to(package).parts[0] not in EXTRA_HOMES
        for name in _imported_on_load(path)
        if name not in sys.stdlib_module_names
        and name != "memoryd"
        and not declared & {_normalized(d) for d in providers.get(name, [])}
    }
    assert not missing, f"not in [project] dependencies: {sorted(missing)}"


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
