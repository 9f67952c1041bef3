"""Text processing shared by every worker pool: the same terms from any thread."""

from __future__ import annotations

import gzip
import json
import random
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd import text

DATA = Path(__file__).resolve().parent.parent / "bench" / "data"
THREADS = 16
SHARE = 400  # texts per thread per round
ROUNDS = 3


def _texts() -> list[str]:
    """Real memories in English and Chinese from the bundled bench datasets."""
    texts: list[str] = []
    for name in ("madial_en", "madial_zh"):
        with gzip.open(DATA / f"{name}.json.gz", "rt", encoding="utf-8") as f:
            texts += [m["text"] for m in json.load(f)["memories"]]
    with gzip.open(DATA / "realmem.json.gz", "rt", encoding="utf-8") as f:
        users = json.load(f)["users"]
    texts += [m for u in users for s in u["sessions"] for m in s["memories"]]
    return texts


@pytest.fixture
def busy_switching() -> Iterator[None]:
    """Threads switch as often as the interpreter allows, as on a loaded worker."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(before)


def _concurrent_round(
    texts: list[str], seed: int
) -> tuple[dict[int, dict[int, list[str]]], list[BaseException]]:
    """Each of THREADS threads tokenizes its own share of the texts, in its own order,
    all starting at once: every word is met by several threads at about the same time."""
    results: dict[int, dict[int, list[str]]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def work(worker: int) -> None:
        share = random.Random(seed + worker).sample(range(len(texts)), SHARE)
        start.wait()
        try:
            results[worker] = {i: text.search_tokens(texts[i]) for i in share}
        except BaseException as exc:  # an IndexError inside the stemmer
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results, errors


def test_sixteen_threads_get_the_terms_one_thread_gets(busy_switching: None) -> None:
    """A worker extracting with 16 threads at once stores each memory's own search
    terms: the stemmer's working state is never shared between threads."""
    texts = _texts()
    assert len(texts) > 3000
    text.stem.cache_clear()
    expected = [text.search_tokens(t) for t in texts]
    for round_ in range(ROUNDS):
        text.stem.cache_clear()  # every thread meets the words unstemmed, at once
        results, errors = _concurrent_round(texts, round_ * THREADS)
        assert errors == []
        for worker, tokens in results.items():
            wrong = [texts[i][:60] for i, t in tokens.items() if t != expected[i]]
            assert wrong == [], f"round {round_}, thread {worker}: {len(wrong)} texts"
        # What the cache kept is right too: a later single-threaded run agrees.
        assert [text.search_tokens(t) for t in texts] == expected
