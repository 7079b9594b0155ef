"""The embedder protocol: texts in, float32 L2-normalised vectors out.

An embedder's ``name`` identifies its vector space (backend, model, dimension): vectors with
different names must never be compared, and a change of name means the index needs re-embedding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to vectors of one fixed space."""

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    # The cosine at or under which a neighbour shares nothing with the query for this model:
    # search drops such dense candidates (never a full-text match).
    similarity_floor: float

    @property
    def window(self) -> int:
        """The most tokens the model sees of one text, special tokens included: a longer text is
        cut (silently, by most models), so chunks are sized to fit it (a plain attribute will do)."""
        ...

    def count_tokens(self, text: str) -> int:
        """How many tokens the model makes of ``text``, special tokens included, by its own
        tokenizer (or, where that is not at hand, an estimate never below it), uncut."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Shape ``(len(texts), dimension)``, float32; each row has unit L2 norm, or is all zeros
        when the text has nothing to embed."""
        ...

    # Optional: ``embed_queries(texts) -> Vectors``, the same space for search queries, for
    # models that embed queries differently from passages; ``embed_queries()`` below falls back
    # to ``embed``. Optional too: ``reads_cjk`` (False for a model that reads no CJK script: its
    # vectors of a Chinese query are noise) and ``similarity_confident`` (the cosine from which a
    # best neighbour is a real match; see ``documents.retrieval.fusion.dense_confidence``), and
    # ``fusion_separation`` (how hybrid search measures how clear a list is: a
    # ``documents.retrieval.fusion.Separation``, the shipped measure when absent), and
    # ``chunk_tokens`` (target, maximum): the chunk sizes, in its tokens, its ranking was measured
    # best at, which bound the settings' sizes (documents/stages/chunk.py).


def normalise_rows(matrix: npt.NDArray[Any]) -> Vectors:
    """``matrix`` as float32 rows of unit L2 norm."""
    vectors = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    # A zero row stays zero: there is no direction to keep, and dividing would make NaNs.
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


def embed_queries(embedder: Any, texts: Sequence[str]) -> Vectors:
    """``texts`` embedded as search queries: through the embedder's ``embed_queries`` where it
    has one (models trained with a query/passage distinction, e.g. e5's ``query: `` prefix),
    else as any text (``embed``)."""
    method = getattr(embedder, "embed_queries", None)
    return method(texts) if method is not None else embedder.embed(texts)
