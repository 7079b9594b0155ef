"""Ranking metrics of one query's answer against its labels, pure Python (no ORM).

An answer is the ranked list of what the search returned, each item the set of label keys it
matches (a hit matches its document's id and its chunk's id). A relevant item counts once, at
the first rank that matches it: five chunks of one relevant document are one find, not five.

- ``recall@k``: relevant items found in the first ``k`` of all relevant items;
- ``MRR@k``: 1 / the rank of the first relevant item within ``k`` (0 when none);
- ``nDCG@k``: discounted cumulative gain ``(2**grade - 1) / log2(rank + 1)`` over the first ``k``,
  divided by the gain of the ideal order of the labels (as Elasticsearch's ``_rank_eval`` does).

Two runs over the same queries compare by :func:`paired_difference`: the mean change of a metric
per query, with the 95 % interval of that mean (Student's t over the paired differences), so a
reader can tell a change from the noise of a few hundred queries.
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


# Student's t for a two-sided 95 % interval, by degrees of freedom: 1-30, then 40, 60 and 120.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042)  # fmt: skip
_T95_LARGE = ((120, 1.980), (60, 2.000), (40, 2.021))


def t95(freedom: int) -> float:
    """Student's t for a two-sided 95 % interval with ``freedom`` degrees of freedom: the value
    of the largest tabulated freedom not above it, so the interval is never narrower than the
    exact one."""
    if freedom <= len(_T95):
        return _T95[freedom - 1]
    for least, value in _T95_LARGE:
        if freedom >= least:
            return value
    return _T95[-1]


@dataclass(frozen=True)
class Difference:
    """The mean of ``after - before`` over the same queries and its 95 % interval."""

    queries: int
    mean: float
    low: float
    high: float

    @property
    def verdict(self) -> str:
        """``better`` or ``worse`` when the whole interval is on that side of 0, else ``unclear``."""
        return "better" if self.low > 0 else "worse" if self.high < 0 else "unclear"


def paired_difference(before: Sequence[float], after: Sequence[float]) -> Difference | None:
    """The change of one metric from ``before`` to ``after`` (the same queries, in the same
    order), with its 95 % interval: the mean difference plus and minus t times its standard error
    (the differences' sample deviation over the root of their number). None under two queries."""
    differences = [b - a for a, b in zip(before, after, strict=True)]
    n = len(differences)
    if n < 2:
        return None
    average = sum(differences) / n
    deviation = math.sqrt(sum((d - average) ** 2 for d in differences) / (n - 1))
    half = t95(n - 1) * deviation / math.sqrt(n)
    return Difference(n, average, average - half, average + half)
