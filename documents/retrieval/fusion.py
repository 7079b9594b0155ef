"""Weighted reciprocal rank fusion of ranked lists, with a score normalised to 0-1.

Each list contributes ``weight / (RRF_K + rank)`` (ranks start at 1) for every item it holds.
``RRF_K = 60`` is the constant of Cormack et al. (2009), the one Elasticsearch, OpenSearch and
Weaviate use by default: it keeps a single list's top rank from dominating the sum.

Two kinds of weight:

- the **configured** weights (a collection's ``text_weight`` / ``embedding_weight``, or a /v1
  request's ``ranking_options.hybrid_search``): how much each list counts when it can be trusted;
- the **confidence** of the dense list for this one query (:func:`dense_confidence`, 0-1): 0 when
  the embedder cannot read the query's script (an English-only model given Chinese), less than 1
  when its best neighbours stand barely above the model's noise level. A list without confidence
  adds nothing: an embedder's noise never outranks a full-text match.

The score is the sum divided by the best sum the *configured* weights allow (rank 1 in every list
of the mode at full confidence), so it means the same in every query: 1.0 is "first in every list,
each fully trusted"; a hit first in the full-text list only scores its weight's share (0.5 with
equal weights), whether the dense list missed it or had nothing to say. A ``score_threshold``
compares against this number.

Pure: no ORM.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

RRF_K = 60

# Letters and ideographs of scripts written without spaces (the ones an English-only model
# turns into unknown pieces); the same ranges as the full-text side's CJK runs.
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f]")
_OTHER_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class Weights:
    """How much the full-text (``text``) and the dense (``embedding``) list count in hybrid
    search; each 0-1 (OpenAI's ``hybrid_search`` weights), not both 0."""

    text: float = 1.0
    embedding: float = 1.0

    def __post_init__(self) -> None:
        for value in (self.text, self.embedding):
            if not 0.0 <= value <= 1.0:
                raise ValueError("weights are between 0 and 1")
        if self.text == 0 and self.embedding == 0:
            raise ValueError("at least one weight must be above 0")

    def of(self, name: str) -> float:
        return self.embedding if name == "semantic" else self.text


@dataclass
class Fused:
    key: int
    score: float
    ranks: dict[str, int] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)


def cjk_share(query: str) -> float:
    """The share of the query's units that are CJK: each ideograph or kana counts as one unit, as
    does each word of other scripts ("LibreOffice Calc 辅助功能": 4 of 6)."""
    cjk = len(_CJK.findall(query))
    words = len(_OTHER_WORD.findall(_CJK.sub(" ", query)))
    return cjk / (cjk + words) if cjk + words else 0.0


def dense_confidence(
    query: str,
    top_similarity: float | None,
    *,
    floor: float,
    confident: float,
    reads_cjk: bool,
) -> float:
    """How far the dense list can be trusted for ``query`` (0-1).

    The script: an embedder that does not read CJK scripts gets nothing for a query that is half
    CJK or more, and less the more CJK it holds below that (a Chinese query naming a product in
    Latin letters is still a Chinese query: the pages it should find are Chinese too). The
    scores: the best neighbour's cosine ``top_similarity`` scaled from the model's noise level
    (``floor``, 0) to the cosine it means a real match at (``confident``, 1); no neighbour above
    the floor, no confidence.
    """
    readable = 1.0 if reads_cjk else max(0.0, 1.0 - 2.0 * cjk_share(query))
    if top_similarity is None or readable <= 0.0:
        return 0.0
    if confident <= floor:
        return readable
    standing = (top_similarity - floor) / (confident - floor)
    return readable * min(1.0, max(0.0, standing))


def fuse(
    lists: Mapping[str, Sequence[tuple[int, float]]],
    k: int,
    *,
    weights: Weights | None = None,
    confidence: Mapping[str, float] | None = None,
) -> list[Fused]:
    """The ``k`` best keys of the named ranked lists (each ``(key, component score)``, best
    first), by normalised weighted RRF score; ties keep the order of the first list that ranked
    them. A list's contribution is its configured weight times its ``confidence`` (default 1);
    the score is normalised by the configured weights alone (see the module's docstring).

    Every list's items stay candidates (with their rank and score there), even a list whose
    weight is 0: they then follow the items of the lists that count, in their own order.
    """
    if not lists:
        return []
    weights = weights or Weights()
    confidence = confidence or {}
    # A list alone ranks by itself: its configured weight is the whole of the best sum.
    nominal = {name: weights.of(name) if len(lists) > 1 else 1.0 for name in lists}
    best = sum(nominal.values()) / (RRF_K + 1)
    fused: dict[int, Fused] = {}
    for name, ranked in lists.items():
        effective = nominal[name] * min(1.0, max(0.0, confidence.get(name, 1.0)))
        for rank, (key, score) in enumerate(ranked, start=1):
            item = fused.setdefault(key, Fused(key, 0.0))
            item.score += effective / (RRF_K + rank)
            item.ranks[name] = rank
            item.scores[name] = score
    for item in fused.values():
        item.score = min(1.0, item.score / best) if best > 0 else 0.0
    return sorted(fused.values(), key=lambda f: -f.score)[:k]
