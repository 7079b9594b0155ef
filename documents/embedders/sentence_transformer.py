"""The ``sentence-transformers`` backend: a local model, when that optional package is installed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from documents.embedders.base import Vectors, normalise_rows
from documents.embedders.registry import register


class SentenceTransformerEmbedder:
    """A local ``sentence-transformers`` model (optional: ``pip install sentence-transformers``).

    Loading the model takes seconds and hundreds of MB: build one per process and reuse it.
    """

    similarity_floor = 0.0  # any model: no floor unless SEARCH_MIN_SCORE sets one

    def __init__(self, model_name: str, *, device: str = "cpu", batch_size: int = 32) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ImproperlyConfigured(
                "EMBEDDINGS_BACKEND='sentence-transformers' needs the sentence-transformers package "
                "(and torch); install them or choose the 'hashing' or 'http' backend"
            ) from exc
        self.model_name = model_name
        self.batch_size = batch_size
        self._model = SentenceTransformer(model_name, device=device)
        # Asked of the model itself: the name of the dimension accessor changed across major versions.
        self._dimension = int(np.asarray(self._model.encode(["dimension probe"])).shape[1])

    @property
    def name(self) -> str:
        return f"st-{self.model_name}"

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def window(self) -> int:
        """The model's ``max_seq_length``: sentence-transformers cuts longer texts there."""
        return int(self._model.max_seq_length)

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the model's own tokenizer, special tokens included, uncut."""
        return len(self._model.tokenizer(text, truncation=False)["input_ids"])

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` with the local model; see :class:`Embedder`."""
        if not texts:
            return np.zeros((0, self._dimension), dtype=np.float32)
        matrix = self._model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True)
        return normalise_rows(matrix)


def build(**options: Any) -> SentenceTransformerEmbedder:
    """The ``EMBEDDINGS_ST_MODEL`` model (``options`` override it and the constructor's defaults)."""
    model = settings.EMBEDDINGS_ST_MODEL
    return SentenceTransformerEmbedder(**{"model_name": model, **options})


register("sentence-transformers", build, prefix="st-")
