"""The LLM client: the openai SDK, one tenacity retry policy, structured output into pydantic.

The SDK's own retries are off (max_retries=0) so there is exactly one retry policy:
429 (honouring Retry-After), 5xx, 408, timeouts and connection errors are retried with
exponential backoff and jitter; anything else fails at once.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)

from memoryd import tracing
from memoryd.errors import (
    LLMEndpointError,
    LLMError,
    LLMOutputError,
    LLMTransientError,
    field_errors,
)
from memoryd.llm.salvage import complete_prefix
from memoryd.settings import Settings

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)

MAX_RETRY_AFTER_SECONDS = 120.0


@dataclass
class LLMResult(Generic[T]):
    value: T
    model: str
    tokens_in: int
    tokens_out: int
    calls: int


def _retry_after(exc: openai.APIStatusError) -> float | None:
    header = exc.response.headers.get("retry-after")
    if header is None:
        return None
    try:
        return min(max(float(header), 0.0), MAX_RETRY_AFTER_SECONDS)
    except ValueError:
        return None  # an HTTP date; fall back to our own backoff


NOT_JSON = "the LLM endpoint answered with a body that is not JSON: is OPENAI_BASE_URL its API?"


def _raised_in_sdk(exc: BaseException) -> bool:
    """Whether `exc` was raised inside the openai package (its parsing of an answer)."""
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and f"{os.sep}openai{os.sep}" in frames[-1].filename


def classify(exc: Exception) -> LLMError:
    """Map an SDK exception to transient (retried) or permanent."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return LLMTransientError(f"LLM request timed out: {exc}")
    if isinstance(exc, openai.APIConnectionError):
        return LLMTransientError(f"cannot reach the LLM endpoint: {exc}")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        if status == 429 or status == 408 or status >= 500:
            return LLMTransientError(f"LLM endpoint answered {status}", _retry_after(exc))
        # The body's message is not kept: some servers quote the request, the turns.
        described = f"LLM endpoint answered {status}{_error_kind(exc)}"
        if status in (401, 403, 404):
            return LLMEndpointError(described)
        return LLMError(described)
    return LLMError(f"LLM call failed: {type(exc).__name__}")


def _error_kind(exc: openai.APIStatusError) -> str:
    """The error's type and code as the body gives them ("invalid_request_error"), short
    names that quote nothing."""
    kinds = [str(k) for k in (exc.type, exc.code) if isinstance(k, str | int) and k != ""]
    return f" ({', '.join(k[:60] for k in kinds)})" if kinds else ""


class _WaitRetryAfterOrBackoff:
    """Wait what the server asked for (Retry-After), else exponential backoff with jitter."""

    def __init__(self, max_seconds: float) -> None:
        self._backoff = wait_exponential_jitter(multiplier=0.5, max=max_seconds, jitter=0.5)

    def __call__(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, LLMTransientError) and exc.retry_after is not None:
            return exc.retry_after
        return float(self._backoff(state))


def client_key(settings: Settings) -> tuple[object, ...]:
    """Every setting an LLMClient reads: clients built from settings equal in these are
    interchangeable, so one can serve every agent (memoryd/llm/shared.py)."""
    return (
        settings.llm.llm_base_url,
        settings.llm.llm_api_key,
        settings.llm.llm_timeout_seconds,
        settings.llm.llm_retries,
        settings.llm.llm_backoff_max_seconds,
        settings.llm.llm_response_format,
        settings.llm.llm_temperature,
        settings.llm.llm_max_tokens,
        settings.server.tracing,
    )


@functools.cache
def wire_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema a model answers to, built once per class: pydantic builds it anew
    on every call, which cost more CPU than the rest of sending the request. Read only."""
    wire = getattr(schema, "response_json_schema", schema.model_json_schema)
    built: dict[str, Any] = wire()
    return built


class LLMClient:
    def __init__(self, settings: Settings) -> None:
        # Imported here: the SDK takes a third of a second to load, which every CLI
        # command and process that never calls a model would pay.
        import openai

        self.settings = settings
        self._client = openai.OpenAI(
            api_key=settings.llm.llm_api_key or "not-needed",
            base_url=settings.llm.llm_base_url,
            timeout=settings.llm.llm_timeout_seconds,
            max_retries=0,
        )

    def _create(self, **kwargs: Any) -> Any:
        """One chat completion (its retries included) in a `memoryd.llm.chat` span."""
        with tracing.span(self.settings, "memoryd.llm.chat", "client") as span:
            response = self._retried(self._client.chat.completions.create, **kwargs)
            tracing.record_llm_call(span, kwargs["model"], response)
        return response

    def embed(self, model: str, texts: list[str]) -> list[list[float]]:
        """Embedding vectors for `texts`, in order, under the same retry policy."""
        name = "memoryd.llm.embeddings"
        with tracing.span(self.settings, name, "client", texts=len(texts)) as span:
            response = self._retried(self._client.embeddings.create, model=model, input=texts)
            tracing.record_llm_call(span, model, response)
        ordered = sorted(response.data, key=lambda d: d.index)
        if len(ordered) != len(texts):  # a vector per text, or none can be matched to its text
            raise LLMError(
                f"the embeddings endpoint answered {len(ordered)} vectors for {len(texts)} texts"
            )
        return [list(d.embedding) for d in ordered]

    def _retried(self, call: Any, **kwargs: Any) -> Any:
        """One HTTP call, retried on transient errors only."""
        retrying = Retrying(
            retry=retry_if_exception_type(LLMTransientError),
            stop=stop_after_attempt(self.settings.llm.llm_retries + 1),
            wait=_WaitRetryAfterOrBackoff(self.settings.llm.llm_backoff_max_seconds),
            reraise=True,
            before_sleep=lambda s: log.warning(
                "LLM call failed (%s), retry %d",
                s.outcome.exception() if s.outcome else "?",
                s.attempt_number,
            ),
        )
        from openai import OpenAIError

        for attempt in retrying:
            with attempt:
                # A web page where the API should answer (a proxy's, a wrong base URL's):
                # the endpoint's fault, retried and counted as an outage, never the
                # turns'. The SDK fails on one labelled JSON, and returns one labelled
                # as a page as its text.
                try:
                    answered = call(**kwargs)
                except OpenAIError as exc:
                    raise classify(exc) from exc
                except json.JSONDecodeError as exc:
                    raise LLMTransientError(NOT_JSON) from exc
                except AttributeError as exc:  # the SDK reading a page's text as an answer
                    if not _raised_in_sdk(exc):
                        raise
                    raise LLMTransientError(NOT_JSON) from exc
                if isinstance(answered, str):
                    raise LLMTransientError(NOT_JSON)
                return answered
        raise AssertionError("unreachable")  # pragma: no cover

    def _response_format(self, schema: type[BaseModel]) -> dict[str, Any]:
        if self.settings.llm.llm_response_format == "json_schema":
            named = {"name": schema.__name__, "schema": wire_schema(schema)}
            return {"type": "json_schema", "json_schema": named}
        return {"type": "json_object"}

    def _length_limit(self) -> dict[str, int]:
        """A cut-off answer is repaired once (complete_json); a looping one is cut."""
        limit = self.settings.llm.llm_max_tokens
        return {"max_tokens": limit} if limit else {}

    def complete_json(
        self, model: str, messages: list[dict[str, str]], schema: type[T]
    ) -> LLMResult[T]:
        """Ask for JSON matching `schema`; one repair round if the answer does not parse."""
        messages = list(messages)
        tokens_in = tokens_out = calls = 0
        last_error = ""
        for round_ in range(2):
            response = self._create(
                model=model,
                messages=messages,
                response_format=self._response_format(schema),
                temperature=self.settings.llm.llm_temperature,
                **self._length_limit(),
            )
            calls += 1
            if response.usage is not None:
                tokens_in += response.usage.prompt_tokens or 0
                tokens_out += response.usage.completion_tokens or 0
            if not response.choices:
                last_error = "the answer had no choices"
                continue
            choice = response.choices[0]
            text = choice.message.content or ""
            truncated = choice.finish_reason == "length"
            try:
                # Python's parser, not pydantic's: it keeps an escaped lone surrogate
                # ("\\ud800") as a string for the schema to refuse in one item alone.
                value = schema.model_validate(_parsed(text, truncated))
            except (ValueError, ValidationError, RecursionError) as exc:
                last_error = (
                    "the answer was cut off (finish_reason=length); " if truncated else ""
                ) + _short_errors(exc)
                if round_ == 0:
                    messages += [
                        {"role": "assistant", "content": text[:4000]},
                        {"role": "user", "content": _repair_request(last_error)},
                    ]
                continue
            return LLMResult(value, response.model or model, tokens_in, tokens_out, calls)
        raise LLMOutputError(f"model output is not valid {schema.__name__} JSON: {last_error}")


def _parsed(text: str, truncated: bool) -> Any:
    """The answer as JSON; one cut off at the token limit, up to its last whole item."""
    try:
        return json.loads(text)
    except ValueError:
        salvaged = complete_prefix(text) if truncated else None
        if salvaged is None:
            raise
        log.warning("an answer cut off at the token limit: keeping its complete items")
        return salvaged


def _short_errors(exc: ValueError | RecursionError) -> str:
    if isinstance(exc, RecursionError):
        return "answer: nested too deeply"
    if not isinstance(exc, ValidationError):  # json.JSONDecodeError
        return f"answer: not JSON ({exc})"
    return "; ".join(f"{field or 'answer'}: {message}" for field, message in field_errors(exc)[:5])


def _repair_request(error: str) -> str:
    return (
        "Your previous answer could not be used: "
        + error
        + ". Reply again with only the complete, valid JSON object, nothing else. "
        + "Keep it short if it was cut off."
        + " Example shape: "
        + json.dumps({"facts": []})
    )
