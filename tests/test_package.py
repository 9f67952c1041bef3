"""`import memoryd` loads its public names when first used, and every one of them."""

from __future__ import annotations

import subprocess
import sys

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
