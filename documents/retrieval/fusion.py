"""Fusion of ranked lists by their scores, each list counted as far as it is clear.

A ranked list's scores say more than its ranks: a full-text list whose first hit scores twice its
fifth has found the page; a dense list whose first ten cosines lie within a few hundredths of each
other has found nothing in particular. Reciprocal rank fusion, which this replaces, gave both the
same say, and a flat dense list pushed clear full-text winners down (bench/README.md, "Fusion by
separation"). Here, for each list of the query:

- **standing** (0-1): where an item's score lies between the list's top score (1) and its
  bottom (0): the list's ``BOTTOM_RANK``-th score or its ``floor``, whichever is higher (for the
  dense list the floor is the model's noise cosine, so a list at noise level stands nowhere);
  items at or below the bottom stand at 0 and stay candidates, after those that stand higher;
- **separation** (0-1): how far the list's first score leads its 5th (the floor when the list
  is shorter), as a share of the first: how clear the list is about its winner. The embedder
  may measure it its own way (:class:`Separation`, below);
- the less clear list of two counts the **ratio** of its separation to the clearer one's (a flat
  list beside a clear one counts little; two lists as clear count alike).

Two kinds of weight then multiply a list's standing:

- the **configured** weights (a collection's ``text_weight`` / ``embedding_weight``, or a /v1
  request's ``ranking_options.hybrid_search``): how much each list counts when it can be trusted;
  a weight of 0 takes the list's say away (its items stay candidates, at 0);
- the **confidence** of the dense list for this one query (:func:`dense_confidence`, 0-1): 0 when
  the embedder cannot read the query's script (an English-only model given Chinese), less than 1
  when its best neighbours stand barely above the model's noise level.

An item's score is the sum over the lists divided by the sum of the configured weights, so it
means the same in every query: 1.0 is "first in every list, the lists equally clear, the dense
one fully trusted"; a hit first in the full-text list only scores at most that list's share (0.5
with equal weights), whether the dense list missed it or had nothing to say. A list alone (the
``lexical`` and ``semantic`` modes) ranks by itself, its first hit at 1.0. A ``score_threshold``
compares against this number.

How separation is measured belongs to the embedder (its ``fusion_separation``, a
:class:`Separation`; hybrid search passes the active embedder's, ``documents.search``), and holds
for both lists of the query: a model whose cosines sit high for any two texts (multilingual-e5:
0.79 for unrelated ones) has a dense list whose first cosine leads its 5th by a few hundredths
of itself even when it has found the page, so against its first score it always looks flat.
Its separation is measured above the floor and against the 10th score instead, ``(1st - 10th)
/ (1st - floor)`` (full text's floor is 0: there ``(1st - 10th) / 1st``). The default
(``SHIPPED``: rank 5, as a share of the first) is the shipped measure; MiniLM keeps it: the
other one put its English hybrid below its own full text (bench/README.md, "e5 with the title
counted once", "e5's fusion profile through the API").

Pure: no ORM.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

# Standing is 0 at a list's 10th score (or its floor when higher): the first page of results.
BOTTOM_RANK = 10

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


@dataclass(frozen=True)
class Separation:
    """How a list's separation is measured: how far its first score leads its ``rank``-th (the
    floor when the list is shorter), as a share of the first score (``above_floor`` False) or of
    the first score's height above the list's floor (True). An embedder's fusion profile (its
    ``fusion_separation``); the default is the shipped measure."""

    rank: int = 5
    above_floor: bool = False

    def of(self, scores: Sequence[float], floor: float) -> float:
        """The separation (0-1) of ``scores`` (best first, not empty) above ``floor``."""
        top = scores[0]
        against = scores[self.rank - 1] if len(scores) >= self.rank else floor
        height = top - floor if self.above_floor else top
        return min(1.0, max(0.0, (top - against) / height)) if height > 0 else 0.0


# The shipped measure, for any embedder that declares none: the 5th score, as a share of the 1st.
SHIPPED = Separation()


@dataclass
class Fused:
    key: int
    score: float
    ranks: dict[str, int] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Shape:
    """What fusion reads of one ranked list's scores: its top, its bottom (where standing is 0)
    and its separation (see the module's docstring)."""

    top: float
    bottom: float
    separation: float

    def standing(self, score: float) -> float:
        if self.top <= self.bottom:
            return 1.0 if score >= self.top else 0.0
        return min(1.0, max(0.0, (score - self.bottom) / (self.top - self.bottom)))


def shape(scores: Sequence[float], floor: float = 0.0, separation: Separation = SHIPPED) -> Shape:
    """The shape of a list's scores (best first), ``floor`` the score under which an item means
    nothing (0 for full text; the model's noise cosine for the dense list), its separation
    measured as ``separation`` says."""
    if not scores:
        return Shape(top=floor, bottom=floor, separation=0.0)
    top = scores[0]
    bottom = max(floor, scores[BOTTOM_RANK - 1]) if len(scores) >= BOTTOM_RANK else floor
    return Shape(top=top, bottom=min(bottom, top), separation=separation.of(scores, floor))


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
    floors: Mapping[str, float] | None = None,
    separation: Separation = SHIPPED,
) -> list[Fused]:
    """The ``k`` best keys of the named ranked lists (each ``(key, component score)``, best
    first; a key at most once a list), by the normalised fused score of the module's docstring;
    ties keep the order of the first list that ranked them. ``floors`` gives a list's floor
    (default 0), ``confidence`` its trust for this query (default 1), ``separation`` how every
    list's separation is measured (the embedder's profile).

    Every list's items stay candidates (with their rank and score there), even a list whose
    weight is 0: they then follow the items of the lists that count, in their own order.
    """
    if not lists:
        return []
    weights = weights or Weights()
    confidence = confidence or {}
    floors = floors or {}
    # A list alone ranks by itself: its configured weight is the whole of the best sum.
    nominal = {name: weights.of(name) if len(lists) > 1 else 1.0 for name in lists}
    shapes = {name: shape([s for _, s in r], floors.get(name, 0.0), separation) for name, r in lists.items()}
    trust = {name: nominal[name] * min(1.0, max(0.0, confidence.get(name, 1.0))) for name in lists}
    # Only the lists that have a say are compared: a list weighed 0, or not trusted at all for
    # this query, makes no other list less clear.
    clearest = max((shapes[n].separation for n in lists if trust[n] > 0), default=0.0)
    total = sum(nominal.values())
    fused: dict[int, Fused] = {}
    for name, ranked in lists.items():
        clarity = min(1.0, shapes[name].separation / clearest) if clearest > 0 else 1.0
        effective = trust[name] * clarity
        for rank, (key, score) in enumerate(ranked, start=1):
            item = fused.setdefault(key, Fused(key, 0.0))
            item.score += effective * shapes[name].standing(score)
            item.ranks[name] = rank
            item.scores[name] = score
    for item in fused.values():
        item.score = min(1.0, item.score / total) if total > 0 else 0.0
    return sorted(fused.values(), key=lambda f: -f.score)[:k]
