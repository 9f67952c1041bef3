"""A rerank stage after fusion (seed 004: multi-path recall, then reranking), off unless
MEMORYD_RERANK names one:

- "endpoint": the common rerank API at MEMORYD_RERANK_URL, `POST {url}/rerank` with
  model, query, documents and top_n, answered with results of index and
  relevance_score (llama.cpp's server, Text Embeddings Inference, Cohere- and
  Jina-compatible gateways);
- "cross-encoder": a sentence-transformers cross-encoder from MEMORYD_RERANK_MODEL, a
  local path (never downloaded).

Only the first MEMORYD_RERANK_TOP_N of the fused list are reranked, within
MEMORYD_RERANK_TIMEOUT seconds; a reranker that fails, is slow or answers nonsense leaves
the fused order as it was, is logged, and is counted (memoryd_rerank_failures_total).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memoryd.errors import ConfigError
from memoryd.llm.shared import Shared
from memoryd.recall.search import Scored
from memoryd.settings import RecallSettings

log = logging.getLogger(__name__)

RERANK_FAILURES: Any = None
try:  # the 'server' extra: without it there is no /metrics to count for
    from prometheus_client import Counter

    RERANK_FAILURES = Counter(
        "memoryd_rerank_failures",
        "Recalls whose rerank step failed and kept the fused order, by reason",
        ["reason"],
    )
except ImportError:  # pragma: no cover - the test suite installs the extra
    pass
MAX_DOCUMENT_CHARS = 2000  # a memory longer than this is judged by its beginning


class Reranker(Protocol):
    def scores(self, query: str, documents: list[str]) -> list[float]:
        """How relevant each document is to the query, in the documents' order."""
        ...


class _Result(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False)  # NaN would make the order arbitrary

    index: int = Field(ge=0)
    relevance_score: float


class _Answer(BaseModel):
    results: list[_Result]


class _Refused(Exception):
    """The rerank endpoint answered an HTTP error."""

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


class EndpointReranker:
    """The common rerank API over HTTP. httpx is imported here, not with the module:
    with its command-line extras installed it loads rich and pygments, a quarter of a
    second of every process that recalls (each `memoryd` command) with no reranker."""

    def __init__(self, settings: RecallSettings) -> None:
        import httpx

        if not settings.rerank_url:
            raise ConfigError("MEMORYD_RERANK=endpoint needs MEMORYD_RERANK_URL")
        self.url = settings.rerank_url.rstrip("/") + "/rerank"
        self.model = settings.rerank_model or ""
        headers = {"Authorization": f"Bearer {settings.rerank_api_key}"}
        self.client = httpx.Client(
            timeout=settings.rerank_timeout, headers=headers if settings.rerank_api_key else {}
        )

    def scores(self, query: str, documents: list[str]) -> list[float]:
        import httpx  # loaded by __init__ already

        body = {"model": self.model, "query": query, "documents": documents}
        try:
            response = self.client.post(self.url, json={**body, "top_n": len(documents)})
        except httpx.TimeoutException as exc:
            raise TimeoutError(str(exc)) from exc
        if not response.is_success:
            raise _Refused(response.status_code)
        answer = _Answer.model_validate_json(response.content)
        found = [float("-inf")] * len(documents)
        for result in answer.results:
            if result.index >= len(documents):
                raise ValueError(f"rerank result index {result.index} out of range")
            found[result.index] = result.relevance_score
        return found


class CrossEncoderReranker:
    """A sentence-transformers cross-encoder from a local path."""

    def __init__(self, settings: RecallSettings) -> None:
        from memoryd.recall.embedders import local_model_path

        if not settings.rerank_model:
            raise ConfigError("MEMORYD_RERANK=cross-encoder needs MEMORYD_RERANK_MODEL, a path")
        try:
            from sentence_transformers import CrossEncoder
        except ImportError as exc:
            raise ConfigError(
                "MEMORYD_RERANK=cross-encoder needs sentence-transformers: "
                "pip install 'memoryd[local-embeddings]'"
            ) from exc
        self.model = CrossEncoder(str(local_model_path(settings.rerank_model or "")))
        self.lock = threading.Lock()

    def scores(self, query: str, documents: list[str]) -> list[float]:
        with self.lock:
            found = self.model.predict([(query, d) for d in documents])
        return [float(s) for s in found]


_SHARED: Shared[Reranker] = Shared(4)
_BROKEN: dict[tuple[object, ...], float] = {}  # configurations that failed to load, when
BUILD_RETRY_SECONDS = 60.0
# Local rerankers run on this pool so a recall waits at most the timeout for them; a
# recall finding every slot taken keeps its fused order instead of queueing behind.
_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="memoryd-rerank")
_LOCAL_SLOTS = threading.BoundedSemaphore(2)


def _released(reranker: Reranker, query: str, documents: list[str]) -> list[float]:
    try:
        return reranker.scores(query, documents)
    finally:
        _LOCAL_SLOTS.release()


def reranker_for(settings: RecallSettings) -> Reranker | None:
    """The configured reranker, one per process and configuration; None when off, or
    when it cannot be built (logged and counted, retried after BUILD_RETRY_SECONDS): a
    reranker never fails a recall."""
    kind = settings.rerank
    if kind == "off":
        return None
    key = (kind, settings.rerank_url, settings.rerank_model, settings.rerank_timeout)
    failed_at = _BROKEN.get(key)
    if failed_at is not None and time.monotonic() - failed_at < BUILD_RETRY_SECONDS:
        return None
    build = EndpointReranker if kind == "endpoint" else CrossEncoderReranker
    try:
        return _SHARED.get(key, lambda: build(settings))
    except Exception as exc:
        _BROKEN[key] = time.monotonic()
        _failed("unavailable", f"reranker not loaded: {_first_line(exc)}")
        return None


def reranked(
    settings: RecallSettings, reranker: Reranker, query: str, top: Scored, contents: dict[int, str]
) -> Scored:
    """`top` with its first MEMORYD_RERANK_TOP_N in the reranker's order (its score in
    the signals as `rerank`); on any failure, `top` as it was."""
    head = [item for item in top[: settings.rerank_top_n] if item[1] in contents]
    if len(head) < 2:
        return top
    documents = [contents[mid][:MAX_DOCUMENT_CHARS] for _score, mid, _signals in head]
    found = _scores(settings, reranker, query, documents)
    if found is None:
        return top
    order = sorted(range(len(head)), key=lambda i: found[i], reverse=True)
    ranked = [(head[i][0], head[i][1], {**head[i][2], "rerank": found[i]}) for i in order]
    chosen = {mid for _score, mid, _signals in head}
    return ranked + [item for item in top if item[1] not in chosen]


def _scores(
    settings: RecallSettings, reranker: Reranker, query: str, documents: list[str]
) -> Sequence[float] | None:
    """The reranker's scores, or None (logged and counted) when it cannot give them."""
    try:
        if isinstance(reranker, EndpointReranker):  # its HTTP client keeps the timeout
            found = reranker.scores(query, documents)
        elif not _LOCAL_SLOTS.acquire(blocking=False):
            _failed("busy", "the local reranker is busy with other recalls")
            return None
        else:
            future = _POOL.submit(_released, reranker, query, documents)
            try:
                found = future.result(timeout=settings.rerank_timeout)
            finally:
                if future.cancel():  # not yet started: it never will, nor free its slot
                    _LOCAL_SLOTS.release()
        if len(found) != len(documents):
            raise ValueError("scores for another number of documents")
        return found
    except (FutureTimeout, TimeoutError):
        _failed("timeout", "rerank took longer than MEMORYD_RERANK_TIMEOUT")
    except _Refused as exc:
        _failed("status", f"rerank answered HTTP {exc.status}")
    except (ValidationError, ValueError) as exc:
        _failed("invalid", f"rerank answer unusable: {_first_line(exc)}")
    except Exception as exc:  # a reranker never fails a recall
        _failed("error", f"rerank failed: {type(exc).__name__}: {_first_line(exc)}")
    return None


def _failed(reason: str, message: str) -> None:
    if RERANK_FAILURES is not None:
        RERANK_FAILURES.labels(reason).inc()
    log.warning("%s; the fused order is kept", message)


def _first_line(exc: Any) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else ""
