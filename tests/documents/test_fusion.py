"""Weighted fusion of the full-text and dense lists: a dense list the embedder cannot be trusted
with (a script it does not read, neighbours at its noise level) adds nothing, configured weights
count, and the fused score is normalised by the configured weights alone. Pure functions."""

from __future__ import annotations

import pytest

from documents.retrieval.fusion import RRF_K, Weights, cjk_share, dense_confidence, fuse

# The shape that pushed exact Chinese matches off rank 1 with the English-only default model:
# the full text finds the page (1) first and another (2) second; the dense list, noise for a
# Chinese query, happens to put 2 first and never sees 1.
LEXICAL = [(1, 9.0), (2, 4.0), (3, 1.0)]
NOISE = [(2, 0.41), (5, 0.4), (6, 0.39)]


def test_a_dense_list_without_confidence_cannot_outrank_the_full_text_hit():
    confidence = dense_confidence("打印机的纸张大小", 0.41, floor=0.3, confident=0.4, reads_cjk=False)
    assert confidence == 0.0
    fused = fuse({"lexical": LEXICAL, "semantic": NOISE}, 10, confidence={"semantic": confidence})
    assert [f.key for f in fused][:3] == [1, 2, 3]
    # The noise's own items stay candidates, after everything the full text found.
    assert [f.key for f in fused][3:] == [5, 6]


def test_with_full_confidence_both_lists_count_as_before():
    fused = fuse({"lexical": LEXICAL, "semantic": NOISE}, 10, confidence={"semantic": 1.0})
    assert fused[0].key == 2  # first in one list and second in the other beats first in one
    assert fused[0].ranks == {"lexical": 2, "semantic": 1}


@pytest.mark.parametrize(
    ("query", "top", "reads_cjk", "expected"),
    [
        ("how to set the paper size", 0.5, False, 1.0),  # well above the confident cosine
        ("how to set the paper size", 0.35, False, 0.5),  # half way from the floor
        ("how to set the paper size", None, False, 0.0),  # nothing above the floor
        ("打印机的纸张大小", 0.9, False, 0.0),  # a script the model does not read
        ("打印机的纸张大小", 0.9, True, 1.0),  # a multilingual model does
        ("快捷键 (LibreOffice Calc 辅助功能)", 0.9, False, 0.0),  # Chinese, naming a product
        ("printer paper size in 纸张", 0.9, False, 1 - 2 * 2 / 6),  # mostly English
    ],
)
def test_dense_confidence(query, top, reads_cjk, expected):
    found = dense_confidence(query, top, floor=0.3, confident=0.4, reads_cjk=reads_cjk)
    assert found == pytest.approx(expected)


def test_cjk_share_counts_ideographs_and_other_words_as_units():
    assert cjk_share("纸张 size!") == pytest.approx(2 / 3)
    assert cjk_share("LibreOffice Calc 辅助功能") == pytest.approx(4 / 6)
    assert cjk_share("  ?? ") == 0.0


def test_the_score_is_normalised_by_the_configured_weights_so_it_means_the_same_in_every_query():
    both = fuse({"lexical": [(1, 1.0)], "semantic": [(1, 0.9)]}, 1)
    assert both[0].score == pytest.approx(1.0)  # first in every list, each fully trusted
    lexical_only = fuse({"lexical": [(1, 1.0)], "semantic": [(2, 0.9)]}, 2)
    assert [f.score for f in lexical_only] == pytest.approx([0.5, 0.5])
    # A Chinese query with an English-only model: the full text's first hit is worth its share,
    # not a full 1.0, though nothing outranks it.
    untrusted = fuse({"lexical": [(1, 1.0)], "semantic": [(1, 0.9)]}, 1, confidence={"semantic": 0.0})
    assert untrusted[0].score == pytest.approx(0.5)
    weighted = fuse(
        {"lexical": [(1, 1.0)], "semantic": [(2, 0.9)]}, 2, weights=Weights(text=1.0, embedding=0.5)
    )
    assert [f.key for f in weighted] == [1, 2]
    assert [f.score for f in weighted] == pytest.approx([1 / 1.5, 0.5 / 1.5])
    # One list alone (lexical or semantic mode) ranks by itself: its first hit is 1.0.
    assert fuse({"lexical": [(1, 1.0), (2, 0.5)]}, 2)[1].score == pytest.approx((RRF_K + 1) / (RRF_K + 2))


def test_a_zero_weight_leaves_the_other_list_in_charge():
    fused = fuse({"lexical": LEXICAL, "semantic": NOISE}, 10, weights=Weights(text=1.0, embedding=0.0))
    assert [f.key for f in fused][:3] == [1, 2, 3]
    fused = fuse({"lexical": LEXICAL, "semantic": NOISE}, 10, weights=Weights(text=0.0, embedding=1.0))
    assert [f.key for f in fused][:3] == [2, 5, 6]


@pytest.mark.parametrize(("text", "embedding"), [(0.0, 0.0), (1.5, 1.0), (1.0, -0.1)])
def test_weights_are_0_to_1_and_not_both_0(text, embedding):
    with pytest.raises(ValueError, match="weight"):
        Weights(text=text, embedding=embedding)
