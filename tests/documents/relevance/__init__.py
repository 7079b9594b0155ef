"""The repo's labelled relevance set, and a pure scorer for any ranking function.

``corpus.json``: short documents on varied topics (about a third in Simplified Chinese), each
``{"id", "title", "lang": "en"|"zh", "text"}``. Some hold a rare token (a part number, a policy
reference) exactly once inside a longer passage.

``queries.json``: ``{"q", "kind", "relevant": [doc id, ...]}`` with ``kind`` one of

- ``exact``: a rare token that appears once in the corpus;
- ``paraphrase``: English, naming the thing with other words than the text uses;
- ``chinese``: Chinese queries against the Chinese documents, some paraphrased, some lexical;
- ``unrelated``: nothing in the corpus answers them (``relevant`` is empty); they are not scored
  for hits, and serve to see how a ranking scores junk.

Plain Python, no Django and no ORM: benchmarks and tests both use it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypedDict

HERE = Path(__file__).resolve().parent
SCORED_KINDS = ("exact", "paraphrase", "chinese")


class Document(TypedDict):
    id: str
    title: str
    lang: str
    text: str


class Query(TypedDict):
    q: str
    kind: str
    relevant: list[str]


def _load(name: str) -> Any:
    with (HERE / name).open(encoding="utf-8") as handle:
        return json.load(handle)


@cache
def _corpus() -> tuple[Document, ...]:
    return tuple(_load("corpus.json"))


@cache
def _queries() -> tuple[Query, ...]:
    return tuple(_load("queries.json"))


def load_corpus() -> list[Document]:
    """The labelled documents (a fresh list each call: callers may mutate it)."""
    return [Document(**doc) for doc in _corpus()]


def load_queries(kind: str | None = None) -> list[Query]:
    """The labelled queries, all of them or those of one ``kind``."""
    return [
        Query(q=q["q"], kind=q["kind"], relevant=list(q["relevant"]))
        for q in _queries()
        if kind is None or q["kind"] == kind
    ]


@dataclass(frozen=True)
class KindScore:
    """Hit rates of one query kind: the share of queries with a relevant id at rank 1 / in the top 3."""

    kind: str
    queries: int
    hit_at_1: float
    hit_at_3: float
    misses_at_3: tuple[str, ...]  # the queries with no relevant id in the top 3, to print on failure

    def __str__(self) -> str:
        return f"{self.kind}: hit@1 {self.hit_at_1:.0%}, hit@3 {self.hit_at_3:.0%} (n={self.queries})"


def score(
    rank: Callable[[str], Sequence[str]], queries: Iterable[Query] | None = None
) -> dict[str, KindScore]:
    """Score a ranking function per query kind.

    ``rank(query_text)`` returns document ids, best first (duplicates, e.g. several chunks of one
    document, count at their first position). Queries without relevant ids are skipped.
    """
    per_kind: dict[str, list[tuple[Query, list[str]]]] = {}
    for query in load_queries() if queries is None else queries:
        if not query["relevant"]:
            continue
        ranked = list(dict.fromkeys(rank(query["q"])))  # first occurrence of each id, order kept
        per_kind.setdefault(query["kind"], []).append((query, ranked))
    result: dict[str, KindScore] = {}
    for kind, rows in per_kind.items():
        hit1 = sum(1 for q, ranked in rows if set(ranked[:1]) & set(q["relevant"]))
        misses = tuple(q["q"] for q, ranked in rows if not set(ranked[:3]) & set(q["relevant"]))
        result[kind] = KindScore(
            kind=kind,
            queries=len(rows),
            hit_at_1=hit1 / len(rows),
            hit_at_3=(len(rows) - len(misses)) / len(rows),
            misses_at_3=misses,
        )
    return result
