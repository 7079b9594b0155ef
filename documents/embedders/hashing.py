"""The ``hashing`` backend: a lexical embedder with no model and no network."""

from __future__ import annotations

import hashlib
import itertools
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from django.conf import settings

from documents.embedders.base import Vectors, normalise_rows
from documents.embedders.registry import register

_HAN_KANA_HANGUL = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f"
_CJK_RUN = re.compile(rf"[{_HAN_KANA_HANGUL}]+")
_WORD = re.compile(rf"[^\W_{_HAN_KANA_HANGUL}]+")


class HashingEmbedder:
    """Signed feature hashing of words and characters: lexical, not semantic.

    Features are lowercased word unigrams and bigrams, and, for Chinese, Japanese and Korean
    script (written without spaces), character unigrams and bigrams. Each feature is hashed with
    BLAKE2b (stable across processes, unlike the salted built-in ``hash``) to a column and a sign,
    weighted ``1 + log(count)``. Texts that share words score high; synonyms and paraphrases with
    no common words do not, and words that collide in the hash add a little noise. It is fast,
    needs no model, and gives a search that works offline.
    """

    VERSION = 1  # bump when features or hashing change: it changes the vector space

    similarity_floor = 0.05  # a cosine this low is a hash collision, not a shared word

    # No model cuts its input: the window only keeps chunks to a size a reader can take in at once
    # (and within what a /v1 static chunking strategy may ask for). Not part of the vector space.
    DEFAULT_WINDOW = 4096

    def __init__(self, dimension: int = 1024, *, window: int = DEFAULT_WINDOW) -> None:
        if dimension < 16:
            raise ValueError("dimension must be at least 16")
        if window < 32:
            raise ValueError("window must be at least 32")
        self._dimension = dimension
        self.window = window

    @property
    def name(self) -> str:
        return f"hashing-v{self.VERSION}-{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def count_tokens(self, text: str) -> int:
        """This embedder's tokens are its words: Latin words, and CJK characters one by one."""
        text = unicodedata.normalize("NFKC", text)
        return len(_WORD.findall(text)) + sum(len(run) for run in _CJK_RUN.findall(text))

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``; see :class:`Embedder`."""
        matrix = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, count in _features(text).items():
                column, sign = self._slot(feature)
                matrix[row, column] += sign * (1.0 + math.log(count))
        return normalise_rows(matrix)

    def _slot(self, feature: str) -> tuple[int, float]:
        digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
        # The lowest bit picks the sign, so colliding features cancel out on average instead of adding up.
        return (digest >> 1) % self._dimension, 1.0 if digest & 1 else -1.0


def _features(text: str) -> Counter[str]:
    # NFKC folds full-width Latin and digits (common in Chinese text) onto their ASCII forms.
    text = unicodedata.normalize("NFKC", text).casefold()
    features: Counter[str] = Counter()
    words = _WORD.findall(text)
    features.update(f"w:{word}" for word in words)
    features.update(f"b:{a} {b}" for a, b in itertools.pairwise(words))
    for run in _CJK_RUN.findall(text):
        features.update(f"c:{char}" for char in run)
        features.update(f"cc:{run[i : i + 2]}" for i in range(len(run) - 1))
    return features


def build(**options: Any) -> HashingEmbedder:
    """A hashing embedder of ``EMBEDDINGS_HASHING_DIMENSION`` columns (``options`` override it)."""
    return HashingEmbedder(**{"dimension": settings.EMBEDDINGS_HASHING_DIMENSION, **options})


_NAME = re.compile(r"hashing-v(\d+)-(\d+)")


def named(spec: str) -> HashingEmbedder | None:
    """``hashing``, ``hashing:<dimension>`` or a name this version reports (``hashing-v1-512``)."""
    backend, _, dimension = spec.partition(":")
    if backend == "hashing":
        return HashingEmbedder(int(dimension)) if dimension.isdigit() else build()
    hashing = _NAME.fullmatch(spec)
    if hashing and int(hashing.group(1)) == HashingEmbedder.VERSION:
        return HashingEmbedder(int(hashing.group(2)))
    return None


register("hashing", build, named=named)
