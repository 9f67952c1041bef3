"""A small scope's keyword list scored in hand is the list the BM25 statement returns."""

from __future__ import annotations

import random

from memoryd.client import MemoryClient
from memoryd.models.db import session_scope
from memoryd.models.keys import Scope
from memoryd.recall.bm25 import bm25_ranked, term_weights
from memoryd.recall.keyword_scan import bm25_scanned
from memoryd.recall.search import SCAN_LIMIT, read_scope, search_params
from memoryd.settings import Settings
from memoryd.text import MAX_QUERY_TOKENS, last_line_terms, query_term_counts

ANN = Scope("bot", "ann")
VOCABULARY = (
    "green tea coffee morning meetings marathon training Lisbon Porto payment module "
    "release Friday violin cello daughter dentist appointment Portuguese lessons vim "
    "editor theme peanuts allergy budget savings flights hotel Beijing 喜欢 龙井茶 周会 "
    "杭州 西湖 日语 每周 项目 咖啡 早上 跑步 𠀀𠀁 café"
)
WORDS = VOCABULARY.split()
QUERIES = [
    "green tea in the morning",
    "what did she train for, the Lisbon marathon?",
    "payment module release Friday Friday, the release on Friday",
    "龙井茶 周会",
    "杭州的项目",
    "𠀀𠀁 café, café",
    "daughter violin lessons and the dentist appointment",
    "budget savings flights hotel Beijing coffee",
    # A pasted dialogue of more distinct words than a query keeps.
    " ".join(f"x{n} marathon" for n in range(2 * MAX_QUERY_TOKENS)),
    # A dialogue: its last line's terms stressed, some of them said again too.
    "<Ann>: my green tea\n<Bot>: which tea?\n<Ann>: Lisbon green tea, the marathon one",
    # Every term said again: as many weights as a query keeps terms.
    " ".join(f"tea x{n} x{n} tea" for n in range(MAX_QUERY_TOKENS)),
    "nothing matches zebra",
]


def texts(count: int, seed: int) -> list[str]:
    """Memories of one to forty words from a small vocabulary: terms held by many of
    them and by few, repeats within one, short notes beside long ones."""
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(1, 40))) for _ in range(count)]


def test_a_whole_scope_scored_in_hand_ranks_as_the_statement(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    for n, text in enumerate(texts(SCAN_LIMIT - 11, seed=7)):
        category = "project" if n % 3 else "user"
        client.remember("bot", "ann", f"{text} {n}", category=category, name="diet" * (n % 17 == 0))
    client.remember("bot", "ann", "the and of")  # stop words only: no search terms
    for text in texts(10, seed=8):  # the agent's shared memories are in the scope too
        client.remember("bot", "*", text, shared=True)
    client.remember("bot", "bob", "green tea green tea morning")  # another user's
    gone = client.remember("bot", "ann", "green tea Lisbon marathon, soon retired")
    client.forget("bot", "ann", gone.id)
    with session_scope(settings.storage, readonly=True) as session:
        for categories, size in ((None, SCAN_LIMIT), (["project"], 126)):
            params = search_params(ANN, categories, None)
            key = ("test", settings.storage.database_url, str(categories))
            stats, rows = read_scope(session, params, key)
            assert rows is not None and len(rows) == size  # read whole: scored in hand
            assert gone.id not in {row.id for row in rows}
            for query in QUERIES:
                # Repeats and a dialogue's last line weigh more, alike in both.
                counts = query_term_counts(query)
                terms = list(counts)
                weights = term_weights(terms, counts, last_line_terms(query), 0.5)
                expected = bm25_ranked(
                    session, ANN, categories, None, terms, stats, weights=weights
                )
                assert bm25_scanned(rows, terms, stats, weights) == expected, query
                assert expected or query == "nothing matches zebra"
