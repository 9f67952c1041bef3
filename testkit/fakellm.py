"""A real HTTP server speaking the OpenAI chat-completions protocol, scripted per test.

The real `openai` SDK and memoryd's retry policy talk to it over loopback. Scripted
actions are consumed one per request; with the script empty, the default responder
answers like a diligent extractor: it reads the <turns> and <memories> data of the
prompt and returns the facts memoryd's offline rules find, so runs are deterministic.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from memoryd.extraction import offline

_BLOCK = re.compile(r"<(turns|memories)>\n(.*?)\n</\1>", re.S)
# A turn line of the extraction prompt: `[3] 2026-11-02 14:05 user: "content as JSON"`.
_TURN = re.compile(r"\[(\d+)\] (\d{4}-\d\d-\d\d) (\d\d:\d\d) (\w+): (\".*\")")


@dataclass
class Action:
    """One scripted answer: a status code, optional headers, a body or content, a delay."""

    status: int = 200
    content: str | None = None  # assistant message content (200 only)
    finish_reason: str = "stop"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    body: dict[str, Any] | None = None  # raw body: of an error, or of an embeddings answer
    raw: bytes | None = None  # a body that is not JSON at all, labelled as JSON


def answer(payload: dict[str, Any] | str, delay: float = 0.0) -> Action:
    content = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return Action(content=content, delay=delay)


def rate_limited(retry_after: float = 1) -> Action:
    return Action(
        status=429,
        headers={"Retry-After": str(retry_after)},
        body={"error": {"message": "rate limited", "type": "rate_limit"}},
    )


def server_error(status: int = 500) -> Action:
    return Action(status=status, body={"error": {"message": "boom", "type": "server_error"}})


def bad_request() -> Action:
    return Action(status=400, body={"error": {"message": "bad model", "type": "invalid_request"}})


def slow(seconds: float) -> Action:
    """Answer with the default responder after `seconds` (a timeout if over the client's)."""
    return Action(delay=seconds)


def malformed() -> Action:
    return Action(content='{"facts": [{"content": "oops", "confidence": ')


def not_json(content_type: str = "application/json") -> Action:
    """A 200 whose body is a web page (a proxy's, a wrong base URL's), labelled as JSON
    or as what it is."""
    page = b"<html><body>oops</body></html>"
    return Action(raw=page, headers={"Content-Type": content_type})


def truncated() -> Action:
    return Action(content='{"facts": [{"content": "User likes', finish_reason="length")


def parse_prompt(
    messages: list[dict[str, Any]],
) -> tuple[list[tuple[str, str]], dict[int, tuple[str, str]]]:
    """The turns (role, content) and memories {id: (name, content)} of an extraction prompt."""
    turns, memories = parse_dated_prompt(messages)
    return [(role, content) for role, content, _day in turns], memories


def parse_dated_prompt(
    messages: list[dict[str, Any]],
) -> tuple[list[tuple[str, str, date]], dict[int, tuple[str, str]]]:
    """As parse_prompt, each turn with the day the prompt says it was said."""
    text = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")
    turns: list[tuple[str, str, date]] = []
    memories: dict[int, tuple[str, str]] = {}
    for kind, block in _BLOCK.findall(text):
        for line in block.splitlines():
            if kind == "turns" and (match := _TURN.fullmatch(line)):
                day = date.fromisoformat(match.group(2))
                turns.append((match.group(4), json.loads(match.group(5)), day))
            elif kind == "memories" and line.startswith("{"):
                item = json.loads(line)
                memories[int(item["id"])] = (item.get("name", ""), item["content"])
    return turns, memories


def default_extractor_answer(messages: list[dict[str, Any]]) -> str:
    """Extraction prompts get offline-rule facts; summary prompts a recognisable summary."""
    text = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")
    if "<segment>" in text:
        block = text.split("<segment>\n", 1)[1].split("\n</segment>", 1)[0]
        users = [
            json.loads(line)["content"]
            for line in block.splitlines()
            if json.loads(line)["role"] == "user"
        ]
        return json.dumps({"summary": f"[{len(users)} user turns] " + " / ".join(users)})
    if "<segments>" in text:
        previous = text.split("<synopsis>\n", 1)[1].split("\n</synopsis>", 1)[0]
        block = text.split("<segments>\n", 1)[1].split("\n</segments>", 1)[0]
        new = [json.loads(line)["summary"] for line in block.splitlines()]
        kept = [] if previous == "(empty)" else [previous]
        return json.dumps({"synopsis": " || ".join([*kept, *new])})
    if "<facts>\n" in text:
        return resolve_answer(text)
    dated, memories = parse_dated_prompt(messages)
    turns = [(role, content) for role, content, _day in dated]
    facts = offline.extract_facts(turns, memories) + offline.extract_episodes(dated)
    updates = offline.extract_profile_updates(turns, None)
    return json.dumps(
        {
            "facts": [f.model_dump(mode="json", exclude_none=True) for f in facts],
            "profile_updates": [u.model_dump(mode="json") for u in updates],
        },
        ensure_ascii=False,
    )


def resolve_answer(text: str) -> str:
    """A follow-up about unshown memories of a fact's key: like a careful model, it calls
    a memory with the same words the same fact, and retires nothing it cannot tell."""
    block = text.split("<facts>\n", 1)[1].split("\n</facts>", 1)[0]
    facts = [json.loads(line) for line in block.splitlines()]
    _turns, memories = parse_prompt([{"role": "user", "content": text}])
    decisions = []
    for fact in facts:
        same = [a for a, (_n, c) in memories.items() if c.casefold() == fact["content"].casefold()]
        decisions.append({"fact": fact["fact"], "same_as": same[0] if same else None})
    return json.dumps({"decisions": decisions})


EMBEDDING_DIMS = 64


def fake_vector(text: str) -> list[float]:
    """A deterministic 'embedding': hashed character trigrams, so similar texts are close."""
    from memoryd.text import trigrams

    vector = [0.0] * EMBEDDING_DIMS
    for gram in trigrams(text):
        vector[sum(gram.encode()) * 2654435761 % EMBEDDING_DIMS] += 1.0
    return vector


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (a timeout, a killed worker) is part of the tests.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeLLM:
    """Run with `with FakeLLM() as llm:`; point memoryd at `llm.base_url`."""

    def __init__(
        self,
        delay: float = 0.0,
        responder: Callable[[list[dict[str, Any]]], str] = default_extractor_answer,
        listen: str = "127.0.0.1",
    ) -> None:
        self.delay = delay  # applied to every default answer (benchmarks: slow LLM)
        self.responder = responder
        # Consulted when the script is empty (chaos runs): an Action to inject, or None
        # for a normal answer. `down` answers every request with 503 (an outage).
        self.chooser: Callable[[], Action | None] | None = None
        self.down = False
        # An embeddings request holding a text this refuses answers 400, as a real
        # endpoint does for an input longer than its model takes.
        self.refuse_embedding: Callable[[str], bool] = lambda _text: False
        self.script: deque[Action] = deque()
        self.requests: list[dict[str, Any]] = []
        self.arrivals: list[float] = []  # time.monotonic() of each request
        self.senders: list[str] = []  # the address each request came from
        self.lock = threading.Lock()
        self._server = _QuietServer((listen, 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def calls(self) -> int:
        with self.lock:
            return len(self.requests)

    def push(self, *actions: Action) -> None:
        with self.lock:
            self.script.extend(actions)

    def __enter__(self) -> FakeLLM:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next_action(self, body: dict[str, Any], sender: str) -> Action:
        with self.lock:
            self.requests.append(body)
            self.arrivals.append(time.monotonic())
            self.senders.append(sender)
            if self.script:
                return self.script.popleft()
        if self.down:
            return server_error(503)
        chosen = self.chooser() if self.chooser else None
        return chosen or Action(delay=self.delay)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.endswith("/embeddings"):
                    action = fake._next_action(body, self.client_address[0])
                    if action.status != 200 or action.body is not None or action.raw:
                        payload = action.raw or action.body or {}  # scripted as is
                        self._send(action.status, payload, action.headers)
                        return
                    inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
                    if any(fake.refuse_embedding(t) for t in inputs):
                        message = "This model's maximum context length is 8192 tokens"
                        self._send(400, {"error": {"message": message, "type": "invalid_request"}})
                        return
                    self._send(
                        200,
                        {
                            "object": "list",
                            "model": body.get("model", "fake"),
                            "data": [
                                {"object": "embedding", "index": i, "embedding": fake_vector(t)}
                                for i, t in enumerate(inputs)
                            ],
                            "usage": {"prompt_tokens": 1, "total_tokens": 1},
                        },
                    )
                    return
                if not self.path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                action = fake._next_action(body, self.client_address[0])
                if action.delay:
                    time.sleep(action.delay)
                if action.status != 200 or action.raw is not None:
                    self._send(action.status, action.raw or action.body or {}, action.headers)
                    return
                messages = body.get("messages", [])
                content = action.content
                if content is None:
                    content = fake.responder(messages)
                prompt_tokens = sum(len(str(m.get("content", ""))) for m in messages) // 4
                self._send(
                    200,
                    {
                        "id": f"chatcmpl-{len(fake.requests)}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "fake"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": content},
                                "finish_reason": action.finish_reason,
                            }
                        ],
                        "usage": {
                            "prompt_tokens": prompt_tokens,
                            "completion_tokens": len(content) // 4,
                            "total_tokens": prompt_tokens + len(content) // 4,
                        },
                    },
                )

            def _send(
                self,
                status: int,
                payload: dict[str, Any] | bytes,
                headers: dict[str, str] | None = None,
            ) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    headers = {"Content-Type": "application/json", **(headers or {})}
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        return Handler


@contextmanager
def running(delay: float = 0.0) -> Iterator[FakeLLM]:
    with FakeLLM(delay=delay) as llm:
        yield llm
