"""A local sentence-transformers model run by ONNX Runtime: the vectors torch gives, in
less time on a CPU (a short question 4 ms instead of 10 on two cores; a long one gains
less, docs/benchmarks.md).

The model's transformer is exported once per model and library release by torch's
exporter, from the weights on disk (nothing is downloaded), into the folder of fetched
models (llm/local_model.models_dir) or MEMORYD_EMBEDDING_ONNX_DIR, by one process at a
time (a lock file); every process after loads that file. Mean pooling and normalising
stay here, as sentence-transformers does them. A model whose vectors this does not
reproduce (another pooling, a dense layer after it) keeps torch: at load, both embed a
few texts and must agree. A file that fails to load (damaged, or cut short) is exported
anew, once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import re
import tempfile
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
from celery.exceptions import SoftTimeLimitExceeded

from memoryd.recall.embedders import Vectors, unit
from memoryd.recall.model_files import files_digest

log = logging.getLogger(__name__)

INPUTS = ("input_ids", "attention_mask", "token_type_ids")
# Short, Chinese, and past the model's length (truncated): what ONNX must match torch on.
PROBES = [
    "Where does Ali live now?",
    "Bart在圣诞节晚会上跳舞，感觉非常开心。",
    "I moved to Lisbon last spring and work at Acme as a designer. " * 40,
]
AGREEMENT = 0.9999  # least cosine between the two runtimes' vectors of a probe
BATCH = 32  # texts a run, sorted by length so a batch pads little (as sentence-transformers)


class OnnxEncoder:
    """Encodes as the sentence-transformers model it was made from: its tokenizer and
    length limit, the exported transformer, mean pooling, unit length."""

    def __init__(self, session: Any, tokenizer: Any, inputs: list[str], max_length: int) -> None:
        self.session = session
        self.tokenizer = tokenizer
        self.inputs = inputs
        self.max_length = max_length

    def encode(self, texts: list[str]) -> Vectors:
        if not texts:
            return np.empty((0, 0), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        parts = [
            self._run([texts[i] for i in order[start : start + BATCH]])
            for start in range(0, len(order), BATCH)
        ]
        vectors = np.empty((len(texts), parts[0].shape[1]), dtype=np.float32)
        vectors[order] = np.vstack(parts)
        return vectors

    def _run(self, texts: list[str]) -> Vectors:
        encoded = self.tokenizer(
            texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="np"
        )
        feed = {name: encoded[name].astype(np.int64) for name in self.inputs}
        hidden = self.session.run(None, feed)[0]
        mask = encoded["attention_mask"][..., None].astype(np.float32)
        return unit((hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9))


class _Disagrees(Exception):
    """The export's vectors are not torch's."""


def onnx_encoder(model: Any, name: str, folder: Path, cache: Path) -> OnnxEncoder | None:
    """`model` (a SentenceTransformer, `name` as settings give it, loaded from `folder`)
    through ONNX Runtime, or None when onnxruntime is not installed, the export fails or
    the vectors differ."""
    try:
        import onnxruntime
    except ImportError:
        log.info("embedding model %s runs on torch: onnxruntime is not installed", name)
        return None
    try:
        path = export_path(name, folder, cache)
    except OSError as exc:  # a model file it cannot read: torch reads it, or says why
        log.warning("embedding model %s stays on torch: %s", name, _one_line(exc))
        return None
    for _attempt in range(2):
        made_before = path.is_file()
        try:
            encoder = _checked(onnxruntime, model, path)
        except SoftTimeLimitExceeded:  # the task's time is up: not the export's fault
            raise
        except Exception as exc:  # an exporter or runtime that cannot take this model
            if made_before and not isinstance(exc, _Disagrees):
                path.unlink(missing_ok=True)  # damaged, or cut short: exported once more
                continue
            log.warning("embedding model %s stays on torch: %s", name, _one_line(exc))
            return None
        log.info("embedding model %s runs on ONNX Runtime (%s)", name, path)
        return encoder
    return None


def _checked(onnxruntime: Any, model: Any, path: Path) -> OnnxEncoder:
    """The encoder of the export at `path` (made now if missing), once its vectors of
    PROBES are torch's."""
    inputs = [name for name in INPUTS if name in model.tokenizer(PROBES[:1])]
    if not path.is_file():
        _export_once(model, inputs, path)
    options = onnxruntime.SessionOptions()
    # As many threads as torch would use (OMP_NUM_THREADS), sleeping between queries
    # rather than spinning: they share the cores with the database.
    options.intra_op_num_threads = _torch_threads()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    encoder = OnnxEncoder(session, model.tokenizer, inputs, int(model.max_seq_length))
    expected = model.encode(PROBES, normalize_embeddings=True, show_progress_bar=False)
    agreement = float(np.min(np.sum(encoder.encode(PROBES) * expected, axis=1)))
    if agreement < AGREEMENT:
        raise _Disagrees(f"its ONNX vectors differ (cosine {agreement:.4f})")
    return encoder


def _torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


def _one_line(exc: Exception) -> str:
    text = str(exc).strip()
    what = text.splitlines()[0] if text else type(exc).__name__
    return what if isinstance(exc, _Disagrees) else f"no ONNX export ({what})"


def export_path(name: str, folder: Path, cache: Path) -> Path:
    """Where the export of model `name` (from `folder`) is kept in `cache`: named by the
    model's name, its files and the releases, so a new model or release has a new file."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[-60:]
    return cache / f"{stem}-{_fingerprint(folder, cache)}.onnx"


def _export_once(model: Any, inputs: list[str], path: Path) -> None:
    """Export to `path` unless another process did while this one waited for the lock.
    Written under a name of its own, synced and renamed, so a process never loads a
    half-written file. Opening the lock fails at once in a folder it cannot write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.is_file():
            return
        handle, partial = tempfile.mkstemp(dir=path.parent, prefix=path.stem, suffix=".partial")
        os.close(handle)
        try:
            _export(model, inputs, Path(partial))
            with open(partial, "rb") as written:
                os.fsync(written.fileno())
            os.replace(partial, path)
        finally:
            Path(partial).unlink(missing_ok=True)


# This module's way of exporting, and of naming an export: a change makes a new file.
EXPORT_VERSION = 3


def _fingerprint(folder: Path, cache: Path) -> str:
    """The model's files by their bytes (model_files.py), the releases that export and
    run it, and EXPORT_VERSION. Not where the folder is, nor when its files were written:
    the same model installed in a new virtualenv reuses the export."""
    digest = hashlib.sha256(f"{EXPORT_VERSION}:{files_digest(folder, cache)}".encode())
    for package in ("torch", "transformers", "onnxscript", "onnx", "onnxruntime"):
        digest.update(f"{package}={_release(package)}".encode())
    return digest.hexdigest()[:16]


def _release(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:  # the export then fails, and says which is missing
        return "none"


# The exporter's own loggers: hundreds of lines a model at INFO, and a warning that
# torchvision is missing. Its failure is reported as one line instead.
EXPORTER_LOGGERS = ("torch.onnx", "torch.export", "torch._dynamo", "onnxscript", "onnx_ir")


@contextlib.contextmanager
def _quiet(names: tuple[str, ...]) -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _export(model: Any, inputs: list[str], path: Path) -> None:
    import torch

    transformer = model[0].auto_model.eval()

    class Hidden(torch.nn.Module):
        """The transformer's last hidden state from positional inputs, as ONNX feeds them."""

        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, *tensors: Any) -> Any:
            return self.transformer(**dict(zip(inputs, tensors, strict=True))).last_hidden_state

    # Two texts of different lengths: a padded batch, as a fill of many memories sends.
    example = model.tokenizer(PROBES[:2], padding=True, return_tensors="pt")
    batch = torch.export.Dim("batch")
    length = torch.export.Dim("length", max=int(model.max_seq_length))
    with _quiet(EXPORTER_LOGGERS), torch.no_grad():
        torch.onnx.export(
            Hidden().eval(),
            tuple(example[name] for name in inputs),
            str(path),
            input_names=inputs,
            output_names=["hidden"],
            dynamic_shapes=(tuple({0: batch, 1: length} for _ in inputs),),  # *tensors
            dynamo=True,
            external_data=False,  # one file, renamed whole
            verbose=False,
        )
