"""A BERT sentence encoder: the model's tokenizer, batches of texts of similar length, and the
forward pass on onnxruntime (:mod:`documents.embedders.bert_onnx`) or numpy
(:mod:`documents.embedders.bert_numpy`), which give the same vectors.

No Django here: benchmarks import this module on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from documents.embedders.bert_numpy import Array, BertConfig, Forward, NumpyBert, read_tensors

RUNTIMES = ("onnx", "numpy")
# Texts per forward pass, measured on full-window chunks (bench/README.md, "Embedding model"):
# onnxruntime is as fast at 1-8 on an idle core and fastest at 1-2 on a shared one (8 lost a
# third); numpy's products want a few rows, and 32 cost 570 MB of peak memory.
BATCH_SIZES = {"onnx": 2, "numpy": 8}


class BertSentenceEncoder:
    """Encode texts to unit vectors with a BERT model directory in the sentence-transformers layout.

    The directory holds ``config.json``, ``model.safetensors``, ``tokenizer.json`` and
    optionally ``sentence_bert_config.json`` (``max_seq_length``). Nothing is downloaded.
    ``runtime`` runs the forward pass: ``"onnx"`` (onnxruntime on a graph built from the same
    weights at load, :mod:`documents.embedders.bert_onnx`; several times faster) or ``"numpy"``
    (:class:`NumpyBert`, the readable reference the ONNX graph is tested against).
    Instances are read-only after construction, so one may be shared by threads.
    """

    def __init__(
        self, model_dir: Path, *, batch_size: int = 32, runtime: str = "numpy", threads: int = 1
    ) -> None:
        from tokenizers import Tokenizer

        config = BertConfig.from_dir(model_dir)
        self.max_length = config.max_length
        self.dimension = config.dimension
        self.batch_size = batch_size
        self.runtime = runtime
        tensors = read_tensors(model_dir)
        self._forward: Forward
        if runtime not in RUNTIMES:
            raise ValueError(f"unknown runtime {runtime!r}: onnx or numpy")
        if runtime == "numpy":
            self._forward = NumpyBert(tensors, config)
        else:
            from documents.embedders.bert_onnx import OnnxBert

            self._forward = OnnxBert(tensors, config, threads=threads)

        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        # The file carries the training-time fixed padding; batches are padded to their longest text instead.
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=self.max_length)

    def encode(self, texts: Sequence[str]) -> Array:
        """Shape ``(len(texts), dimension)``, float32, unit rows in the order of ``texts`` (a text
        with no tokens gives a unit vector too: the model still sees ``[CLS] [SEP]``)."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(list(texts))
        return encode_by_length([e.ids for e in encodings], self._forward, self.batch_size, self.dimension)


# The most of a batch's cells (texts x its longest text's tokens) that may be padding. A batch is
# padded to its longest text, and the model's work grows with the cells: a document of one full
# chunk (250 tokens) and its short last one (62) cost 500 cells in one batch of two, 312 in two.
MAX_PADDING_SHARE = 0.1


def length_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """The indexes of ``lengths`` sorted by length, cut into batches: consecutive texts share a
    batch while it holds at most ``batch_size`` and its padding stays within
    ``MAX_PADDING_SHARE`` of its cells (a text longer than the rest of the batch allows starts
    the next one)."""
    batches: list[list[int]] = []
    batch: list[int] = []
    tokens = 0  # the batch's, padding left out
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        cells = (len(batch) + 1) * lengths[i]  # sorted: the new text is the batch's longest
        if batch and (len(batch) == batch_size or cells - tokens - lengths[i] > MAX_PADDING_SHARE * cells):
            batches.append(batch)
            batch, tokens = [], 0
        batch.append(i)
        tokens += lengths[i]
    if batch:
        batches.append(batch)
    return batches


def encode_by_length(
    token_ids: Sequence[Sequence[int]], forward: Forward, batch_size: int, dimension: int
) -> Array:
    """Run ``forward`` over batches of texts of similar length (``length_batches``: each batch is
    padded to its longest, and padding is wasted work) and return the rows in the input order."""
    out = np.empty((len(token_ids), dimension), dtype=np.float32)
    for batch in length_batches([len(t) for t in token_ids], batch_size):
        width = max(len(token_ids[i]) for i in batch)
        ids = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.float32)
        for row, i in enumerate(batch):
            n = len(token_ids[i])
            ids[row, :n] = token_ids[i]
            mask[row, :n] = 1.0
        out[batch] = forward(ids, mask)
    return out
