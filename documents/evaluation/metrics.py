"""Ranking metrics of one query's answer against its labels, pure Python (no ORM).

An answer is the ranked list of what the search returned, each item the set of label keys it
matches (a hit matches its document's id and its chunk's id). A relevant item counts once, at
the first rank that matches it: five chunks of one relevant document are one find, not five.

- ``recall@k``: relevant items found in the first ``k`` of all relevant items;
- ``MRR@k``: 1 / the rank of the first relevant item within ``k`` (0 when none);
- ``nDCG@k``: discounted cumulative gain ``(2**grade - 1) / log2(rank + 1)`` over the first ``k``,
  divided by the gain of the ideal order of the labels (as Elasticsearch's ``_rank_eval`` does).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

RECALL_AT = (1, 3, 10)
CUTOFF = 10  # MRR and nDCG are taken at 10
NAMES = ("recall@1", "recall@3", "recall@10", "mrr@10", "ndcg@10")


def gains(answer: Sequence[Iterable[str]], grades: Mapping[str, int]) -> list[tuple[int, str | None]]:
    """Per rank: the grade and key of the relevant item first found there ((0, None) if none)."""
    seen: set[str] = set()
    out: list[tuple[int, str | None]] = []
    for keys in answer:
        found = next((key for key in keys if key in grades and key not in seen), None)
        if found is None:
            out.append((0, None))
        else:
            seen.add(found)
            out.append((grades[found], found))
    return out


def recall(found: Sequence[tuple[int, str | None]], relevant: int, k: int) -> float:
    if relevant == 0:
        return 0.0
    return sum(1 for _, key in found[:k] if key is not None) / relevant


def reciprocal_rank(found: Sequence[tuple[int, str | None]], k: int = CUTOFF) -> float:
    for rank, (_, key) in enumerate(found[:k], start=1):
        if key is not None:
            return 1.0 / rank
    return 0.0


def dcg(grades: Sequence[int], k: int = CUTOFF) -> float:
    return sum((2**grade - 1) / math.log2(rank + 1) for rank, grade in enumerate(grades[:k], start=1))


def ndcg(found: Sequence[tuple[int, str | None]], labels: Mapping[str, int], k: int = CUTOFF) -> float:
    ideal = dcg(sorted(labels.values(), reverse=True), k)
    if ideal == 0:
        return 0.0
    return dcg([grade if key is not None else 0 for grade, key in found], k) / ideal


def score(answer: Sequence[Iterable[str]], labels: Mapping[str, int]) -> dict[str, float]:
    """Every metric of one query: ``answer`` the ranked hits' keys, ``labels`` key -> grade
    (grade 0 labels are not relevant and are left out)."""
    relevant = {key: grade for key, grade in labels.items() if grade > 0}
    found = gains(answer, relevant)
    figures = {f"recall@{k}": recall(found, len(relevant), k) for k in RECALL_AT}
    figures["mrr@10"] = reciprocal_rank(found)
    figures["ndcg@10"] = ndcg(found, relevant)
    return figures


@dataclass(frozen=True)
class Summary:
    queries: int
    figures: dict[str, float]


def mean(rows: Sequence[Mapping[str, float]]) -> Summary:
    """The mean of each metric over ``rows`` (every metric 0 for no rows)."""
    if not rows:
        return Summary(0, dict.fromkeys(NAMES, 0.0))
    return Summary(len(rows), {name: sum(row[name] for row in rows) / len(rows) for name in NAMES})
