"""Reciprocal rank fusion of ranked lists, with a score normalised to 0-1.

Each list contributes ``1 / (RRF_K + rank)`` (ranks start at 1) for every item it holds; the sum
is divided by the best possible sum (rank 1 in every list of the mode), so a chunk that is first
in both the lexical and the semantic list scores 1.0, one first in only one of two lists 0.5.
``RRF_K = 60`` is the constant of Cormack et al. (2009), the one Elasticsearch, OpenSearch and
Weaviate use by default: it keeps a single list's top rank from dominating the sum.

Pure: no ORM.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

RRF_K = 60


@dataclass
class Fused:
    key: int
    score: float
    ranks: dict[str, int] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)


def fuse(lists: Mapping[str, Sequence[tuple[int, float]]], k: int) -> list[Fused]:
    """The ``k`` best keys of the named ranked lists (each ``(key, component score)``, best
    first), by normalised RRF score; ties keep the order of the first list that ranked them."""
    if not lists:
        return []
    best = len(lists) / (RRF_K + 1)
    fused: dict[int, Fused] = {}
    for name, ranked in lists.items():
        for rank, (key, score) in enumerate(ranked, start=1):
            item = fused.setdefault(key, Fused(key, 0.0))
            item.score += 1.0 / (RRF_K + rank)
            item.ranks[name] = rank
            item.scores[name] = score
    for item in fused.values():
        item.score = min(1.0, item.score / best)
    return sorted(fused.values(), key=lambda f: -f.score)[:k]
