"""The ONNX graph of the BERT encoder: built from the weights by the helper API, run by onnxruntime,
the same vectors as the numpy forward pass; and batching by length gives rows back in input order."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from documents.embedders.bert_encoder import MAX_PADDING_SHARE, encode_by_length, length_batches
from documents.embedders.bert_numpy import BertConfig, NumpyBert
from documents.embedders.bert_onnx import OnnxBert, build_graph, make_session

CONFIG = BertConfig(layers=2, heads=4, dimension=16, eps=1e-12, max_length=12)
VOCAB, INNER = 40, 32


def small_bert(seed: int = 3) -> dict[str, np.ndarray]:
    """Random weights of a two-layer BERT in the safetensors names, BERT-like scales."""
    rng = np.random.default_rng(seed)

    def rand(*shape: int, scale: float = 0.3) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    d = CONFIG.dimension
    tensors = {
        "embeddings.word_embeddings.weight": rand(VOCAB, d),
        "embeddings.position_embeddings.weight": rand(CONFIG.max_length, d),
        "embeddings.token_type_embeddings.weight": rand(2, d),
        "embeddings.LayerNorm.weight": 1 + rand(d, scale=0.1),
        "embeddings.LayerNorm.bias": rand(d, scale=0.1),
    }
    for i in range(CONFIG.layers):
        p = f"encoder.layer.{i}"
        # torch's Linear stores (out, in): the builder and NumpyBert transpose alike.
        for name, (out, inp) in {
            "attention.self.query": (d, d),
            "attention.self.key": (d, d),
            "attention.self.value": (d, d),
            "attention.output.dense": (d, d),
            "intermediate.dense": (INNER, d),
            "output.dense": (d, INNER),
        }.items():
            tensors[f"{p}.{name}.weight"] = rand(out, inp)
            tensors[f"{p}.{name}.bias"] = rand(out, scale=0.1)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            tensors[f"{p}.{norm}.weight"] = 1 + rand(d, scale=0.1)
            tensors[f"{p}.{norm}.bias"] = rand(d, scale=0.1)
    return tensors


def padded(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    width = max(len(r) for r in rows)
    ids = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.float32)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
        mask[i, : len(r)] = 1
    return ids, mask


def test_built_graph_is_valid_onnx_and_uses_the_fused_kernels() -> None:
    import onnx

    model = build_graph(small_bert(), CONFIG)

    onnx.checker.check_model(model)
    ops = [(n.domain, n.op_type) for n in model.graph.node]
    for fused in ("Attention", "SkipLayerNormalization", "BiasGelu"):
        assert ops.count(("com.microsoft", fused)) == CONFIG.layers * (
            2 if fused == "SkipLayerNormalization" else 1
        )
    assert [i.name for i in model.graph.input] == ["input_ids", "attention_mask"]
    assert [o.name for o in model.graph.output] == ["embedding"]


def test_graph_gives_the_numpy_forward_pass_vectors_with_padding_ignored() -> None:
    tensors = small_bert()
    numpy_bert, onnx_bert = NumpyBert(tensors, CONFIG), OnnxBert(tensors, CONFIG)
    rows = [[1, 7, 9, 2], [1, 30, 2], [1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 2], [1, 2]]
    ids, mask = padded(rows)

    got = onnx_bert(ids, mask)
    expected = numpy_bert(ids, mask)

    assert got.shape == (4, CONFIG.dimension) and got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(got, expected, atol=2e-6)
    # A text padded into a wider batch gets the vector it gets alone.
    alone = onnx_bert(*padded([rows[1]]))
    np.testing.assert_allclose(got[1], alone[0], atol=2e-6)


def test_graph_on_token_vectors_without_normalising_gives_the_same_means() -> None:
    """The variant e5 uses: the word table outside the graph, the mean's length kept."""
    tensors = small_bert()
    rows = [[1, 7, 9, 2], [1, 30, 2], [1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 2]]
    ids, mask = padded(rows)
    words = dict(tensors)
    table = words.pop("embeddings.word_embeddings.weight")
    model = build_graph(words, CONFIG, token_vectors=True, normalize=False)
    assert [i.name for i in model.graph.input] == ["token_vectors", "attention_mask"]
    session = make_session(model)

    token_vectors = table[ids] + tensors["embeddings.token_type_embeddings.weight"][0]
    (means,) = session.run(
        ["embedding"], {"token_vectors": token_vectors, "attention_mask": mask.astype(np.int64)}
    )

    norms = np.linalg.norm(means, axis=1)
    assert (np.abs(norms - 1) > 1e-3).all()  # not unit vectors: the plain means
    np.testing.assert_allclose(means / norms[:, None], OnnxBert(tensors, CONFIG)(ids, mask), atol=2e-6)


def test_session_runs_on_the_given_number_of_intra_op_threads() -> None:
    assert OnnxBert(small_bert(), CONFIG, threads=1).session.get_session_options().intra_op_num_threads == 1
    assert OnnxBert(small_bert(), CONFIG, threads=2).session.get_session_options().intra_op_num_threads == 2


def test_length_batches_are_padded_to_their_own_longest_and_rows_come_back_in_input_order() -> None:
    rng = random.Random(5)
    texts = [[100 + i] * rng.randint(1, 40) for i in range(23)]  # the token repeated: its id says which text
    widths: list[int] = []

    def forward(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        widths.append(ids.shape[1])
        assert (mask.sum(axis=1) >= 1).all()
        return np.stack([ids[:, 0], mask.sum(axis=1)], axis=1).astype(np.float32)

    out = encode_by_length(texts, forward, batch_size=4, dimension=2)

    assert out[:, 0].tolist() == [t[0] for t in texts]
    assert out[:, 1].tolist() == [len(t) for t in texts]
    assert len(widths) >= 6 and widths == sorted(widths)  # sorted by length: little padding
    assert widths[-1] == max(len(t) for t in texts) and widths[0] < widths[-1]


@given(st.lists(st.integers(min_value=1, max_value=256), max_size=60), st.integers(min_value=1, max_value=16))
def test_length_batches_stay_within_the_padding_share_and_the_batch_size(lengths, batch_size) -> None:
    batches = length_batches(lengths, batch_size)

    order = [i for batch in batches for i in batch]
    assert sorted(order) == list(range(len(lengths)))  # every text once
    assert [lengths[i] for i in order] == sorted(lengths)
    for batch in batches:
        assert 1 <= len(batch) <= batch_size
        cells = len(batch) * max(lengths[i] for i in batch)
        padding = cells - sum(lengths[i] for i in batch)
        assert len(batch) == 1 or padding <= MAX_PADDING_SHARE * cells, [lengths[i] for i in batch]
    # Cut only where it had to: a batch and the next text would break one of the two limits.
    for batch, after in itertools.pairwise(batches):
        joined = [*batch, after[0]]
        cells = len(joined) * lengths[after[0]]
        padding = cells - sum(lengths[i] for i in joined)
        assert len(joined) > batch_size or padding > MAX_PADDING_SHARE * cells


@pytest.fixture(scope="module")
def embedders():
    from documents.embedders.local import LocalModelEmbedder

    return LocalModelEmbedder(runtime="onnx"), LocalModelEmbedder(runtime="numpy")


@pytest.mark.slow
class TestPackagedModel:
    """The real all-MiniLM-L6-v2 on onnxruntime (loads the model)."""

    def test_vectors_match_the_sentence_transformers_reference(self, embedders) -> None:
        reference = json.loads((Path(__file__).parent / "minilm_reference.json").read_text(encoding="utf-8"))
        vectors = embedders[0].embed(reference["texts"])

        cosines = (vectors * np.asarray(reference["vectors"], dtype=np.float32)).sum(axis=1)

        # Measured: 0.9999994 at the lowest (float32 rounding; the numpy pass is as close).
        assert cosines.min() > 0.99999, cosines

    def test_vectors_equal_the_numpy_runtime_in_any_order(self, embedders) -> None:
        from tests.documents.relevance import load_corpus

        texts = [f"{d['title']}\n{d['text'][: 40 * (1 + i % 9)]}" for i, d in enumerate(load_corpus()[:18])]
        shuffled = list(range(len(texts)))
        random.Random(2).shuffle(shuffled)
        onnx_vectors = embedders[0].embed(texts)

        np.testing.assert_allclose(onnx_vectors, embedders[1].embed(texts), atol=2e-5)
        np.testing.assert_allclose(
            embedders[0].embed([texts[i] for i in shuffled]), onnx_vectors[shuffled], atol=1e-6
        )
        alone = np.vstack([embedders[0].embed([t]) for t in texts[:5]])
        np.testing.assert_allclose(onnx_vectors[:5], alone, atol=2e-5)

    def test_a_short_chunk_is_not_padded_to_a_full_ones_width(self, embedders) -> None:
        encoder = embedders[0].load()  # onnxruntime, two texts a batch
        sentence = "The harbour office counted the boats and the weather of every week. "
        # A chunk near the window and a document's short last one.
        full, short = sentence * 19 + "Rain", sentence * 4 + "Then the tide came in at noon."
        token_ids = [e.ids for e in encoder.tokenizer.encode_batch([full, short])]
        assert [len(t) for t in token_ids] == [250, 62] and encoder.batch_size == 2
        widths: list[int] = []

        def forward(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
            widths.append(ids.shape[1])
            return encoder._forward(ids, mask)

        vectors = encode_by_length(token_ids, forward, encoder.batch_size, encoder.dimension)

        assert sorted(widths) == [62, 250]  # the short one alone, not 250 tokens wide
        alone = np.vstack([encoder.encode([full]), encoder.encode([short])])
        np.testing.assert_allclose(vectors, alone, atol=1e-5)

    def test_both_runtimes_share_one_vector_space_name(self, embedders) -> None:
        assert embedders[0].name == embedders[1].name == "local-all-minilm-l6-v2-v1-384"
