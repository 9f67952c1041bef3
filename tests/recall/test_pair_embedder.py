"""use-multilingual-int8+minilm: USE beside MiniLM, each model's cosine counting half,
and MiniLM (English) left out of texts in Chinese, Japanese or Korean."""

from __future__ import annotations

import numpy as np
import pytest

from memoryd.client import MemoryClient
from memoryd.errors import ConfigError
from memoryd.llm.shared import Shared
from memoryd.recall import backfill, embedders
from memoryd.settings import Settings
from memoryd.text import mostly_unsegmented

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


def test_a_text_is_read_as_chinese_from_a_fifth_of_its_letters() -> None:
    assert mostly_unsegmented(CHINESE) and mostly_unsegmented("<Assistant>: 你好，最近怎么样？")
    assert not mostly_unsegmented("I visited 北京 on a long trip through the whole country")
    assert not mostly_unsegmented("") and not mostly_unsegmented("42 + 7")


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
    asked = MemoryClient(pair)
    assert [h.id for h in asked.recall("which instrument do I play?", "bot", "ann", k=1)] == [
        cello.id
    ]
    assert [h.id for h in asked.recall("我平时爱喝什么饮料？", "bot", "ann", k=1)] == [tea.id]


def test_the_pair_without_minilm_says_what_it_needs_in_one_line(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedders, "MINILM", "no-such-minilm")
    monkeypatch.setattr(embedders, "_providers", Shared[embedders.Embedder](size=8))
    pair = settings.updated(embedding_provider="local", embedding_model=embedders.MINILM_PAIR)
    with pytest.raises(ConfigError) as raised:
        embedders.embedder(pair)
    assert str(raised.value).startswith(
        f"MEMORYD_EMBEDDING_MODEL={embedders.MINILM_PAIR} needs no-such-minilm: "
    )
    assert "\n" not in str(raised.value)
