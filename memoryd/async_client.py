"""MemoryClient for asyncio backends (FastAPI, LangGraph, async chat servers).

Every method is MemoryClient's own, run in a bounded pool of threads, so a call never
blocks the event loop and there is no second data layer to keep in step: the same
validation, transactions and errors. The pool has as many threads as the database
pool has connections (`db_pool_size`): more calls than that wait for a thread, off
the loop, instead of for a connection while holding one. A cancelled call stops
waiting at once; its database work, already running in a thread, still finishes.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from memoryd.client import MemoryClient
from memoryd.client_receipts import WAIT_POLL_SECONDS
from memoryd.ingest.receipts import TurnReceipt, all_settled
from memoryd.settings import Settings, get_settings

if TYPE_CHECKING:
    from celery import Celery

P = ParamSpec("P")
R = TypeVar("R")


async def in_thread(pool: ThreadPoolExecutor, call: Callable[[], R]) -> R:
    """Await `call()` run in `pool`, with the caller's context variables (tracing,
    request ids) in effect there: asyncio's own executor hop, lighter than anyio's."""
    context = contextvars.copy_context()
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(pool, functools.partial(context.run, call))


class _InThread(Generic[P, R]):
    """An AsyncMemoryClient method: the MemoryClient method of the same name, awaited
    while it runs in the client's thread pool. Signature and docstring are the sync
    method's, for type checkers and help() alike."""

    def __init__(self, method: Callable[Concatenate[MemoryClient, P], R]) -> None:
        self.method = method
        self.__doc__ = method.__doc__
        signature = inspect.signature(method)
        self.signature = signature.replace(parameters=list(signature.parameters.values())[1:])

    @overload
    def __get__(self, client: None, owner: type) -> _InThread[P, R]: ...
    @overload
    def __get__(
        self, client: AsyncMemoryClient, owner: type
    ) -> Callable[P, Coroutine[Any, Any, R]]: ...
    def __get__(
        self, client: AsyncMemoryClient | None, owner: type
    ) -> _InThread[P, R] | Callable[P, Coroutine[Any, Any, R]]:
        if client is None:
            return self
        method, sync = self.method, client.sync

        async def call(*args: P.args, **kwargs: P.kwargs) -> R:
            return await client.run(functools.partial(method, sync, *args, **kwargs))

        functools.update_wrapper(call, method)
        # help() and tools that read signatures see the bound method's: no `self`.
        del call.__wrapped__  # type: ignore[attr-defined]
        call.__signature__ = self.signature  # type: ignore[attr-defined]
        return call


class AsyncMemoryClient:
    """`await memory.recall(...)`: MemoryClient's methods as coroutines.

    Use it as `async with AsyncMemoryClient(settings) as memory:`, or call `aclose()`
    when done: it waits for the Celery triggers sent so far and lets the threads go.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        celery_app: Celery | None = None,
        dispatch: bool = True,
        threads: int | None = None,
    ) -> None:
        settings = settings or get_settings()
        self.sync = MemoryClient(settings, celery_app=celery_app, dispatch=dispatch)
        self.settings = settings
        self._closed = False
        self._pool = ThreadPoolExecutor(
            max_workers=threads or settings.storage.db_pool_size, thread_name_prefix="memoryd-async"
        )

    async def run(self, call: Callable[[], R]) -> R:
        """Await `call()` run in the client's threads, with the caller's context
        variables (tracing, request ids) in effect there."""
        if self._closed:
            raise RuntimeError("this AsyncMemoryClient is closed: make a new one")
        return await in_thread(self._pool, call)

    async def wait_extracted(
        self, agent_id: str, user_id: str, turn_keys: Sequence[str], timeout: float = 30.0
    ) -> list[TurnReceipt]:
        """MemoryClient.wait_extracted, holding no thread while it waits."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout, 0.0)
        while True:
            found = await self.turn_statuses(agent_id, user_id, turn_keys)
            if all_settled(found) or loop.time() >= deadline:
                return found
            await asyncio.sleep(min(WAIT_POLL_SECONDS, max(deadline - loop.time(), 0.0)))

    async def aclose(self, timeout: float = 5.0) -> None:
        """Wait for the triggers sent so far, then release the threads; the client
        cannot be used afterwards. Closing again does nothing."""
        if self._closed:
            return
        await self.run(functools.partial(self.sync.close, timeout))
        self._closed = True
        self._pool.shutdown(wait=False)

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    # ingest
    enqueue_turn = _InThread(MemoryClient.enqueue_turn)
    enqueue_turns = _InThread(MemoryClient.enqueue_turns)
    ingest_payload = _InThread(MemoryClient.ingest_payload)
    end_session = _InThread(MemoryClient.end_session)
    turn_status = _InThread(MemoryClient.turn_status)
    turn_statuses = _InThread(MemoryClient.turn_statuses)
    flush = _InThread(MemoryClient.flush)
    # read side
    session_context = _InThread(MemoryClient.session_context)
    recall = _InThread(MemoryClient.recall)
    build_context = _InThread(MemoryClient.build_context)
    mark_referenced = _InThread(MemoryClient.mark_referenced)
    execute_tool = _InThread(MemoryClient.execute_tool)
    # memories
    remember = _InThread(MemoryClient.remember)
    save = _InThread(MemoryClient.save)
    update = _InThread(MemoryClient.update)
    forget = _InThread(MemoryClient.forget)
    restore = _InThread(MemoryClient.restore)
    erase = _InThread(MemoryClient.erase)
    get = _InThread(MemoryClient.get)
    list = _InThread(MemoryClient.list)
    history = _InThread(MemoryClient.history)
    health = _InThread(MemoryClient.health)
    # profiles
    profile = _InThread(MemoryClient.profile)
    profiles = _InThread(MemoryClient.profiles)
    put_profile = _InThread(MemoryClient.put_profile)
    patch_profile = _InThread(MemoryClient.patch_profile)
    set_profile_status = _InThread(MemoryClient.set_profile_status)
    profile_history = _InThread(MemoryClient.profile_history)
    build_profile_prompt = _InThread(MemoryClient.build_profile_prompt)
