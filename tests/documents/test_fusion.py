"""Fusion of the full-text and dense lists by their scores: each list counts as far as it is clear
about its winner (a flat list beside a clear one counts little), a dense list the embedder cannot
be trusted with (a script it does not read, neighbours at its noise level) adds nothing,
configured weights count (0 takes a list's say away), and the fused score is normalised by the
configured weights alone. Pure functions."""

from __future__ import annotations

import pytest

from documents.embedders.e5 import E5Embedder
from documents.embedders.local import LocalModelEmbedder
from documents.retrieval.fusion import SHIPPED, Separation, Weights, cjk_share, dense_confidence, fuse, shape

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


# The model's noise cosine in these tests (the default model's is 0.3).
FLOOR = 0.3


def test_a_clear_full_text_winner_is_not_pushed_down_by_a_flat_dense_list():
    # Full text: page 1 scores twice its runner-up. Dense: ten cosines within 0.03 of each other,
    # just above the noise, page 2 first by a hair and page 1 nowhere. Rank fusion put 2 first
    # (second in one list and first in the other beats first in one).
    lexical = [(1, 20.0), (2, 10.0), *[(n, 9.0 - n / 10) for n in range(3, 12)]]
    flat = [(2, 0.53), *[(n, 0.53 - n / 400) for n in range(12, 21)]]
    fused = fuse({"lexical": lexical, "semantic": flat}, 10, floors={"semantic": FLOOR})
    assert [f.key for f in fused][:2] == [1, 2]


def test_a_clear_dense_winner_wins_over_a_flat_full_text_list():
    # A paraphrase: the full text finds the words everywhere alike (5.0 down to 4.1), the model
    # finds page 3 far ahead of the rest. Rank fusion kept page 1 (first in the full text and
    # second by meaning) ahead of page 3 (third and first).
    lexical = [(n, 5.1 - n / 10) for n in range(1, 11)]
    dense = [(3, 0.8), (1, 0.45), *[(n, 0.45 - n / 100) for n in range(11, 19)]]
    fused = fuse({"lexical": lexical, "semantic": dense}, 10, floors={"semantic": FLOOR})
    assert fused[0].key == 3
    assert fused[0].ranks == {"lexical": 3, "semantic": 1}


def test_a_list_counts_by_how_clear_it_is_beside_the_other():
    clear, flat = shape([20.0, 10.0, 9.0, 8.0, 5.0]), shape([0.53, 0.52, 0.52, 0.51, 0.5], FLOOR)
    assert clear.separation == pytest.approx(0.75)  # the first leads the fifth by 3/4 of itself
    assert flat.separation == pytest.approx(0.03 / 0.53)
    # Shorter than five: the missing scores are at the floor.
    assert shape([0.6], FLOOR).separation == pytest.approx(0.5)
    assert shape([]).separation == 0.0


def test_standing_runs_from_the_tenth_score_or_the_floor_to_the_top():
    eleven = shape([float(n) for n in range(20, 9, -1)])  # 20 .. 10
    assert (eleven.top, eleven.bottom) == (20.0, 11.0)  # the tenth score
    assert eleven.standing(20.0) == 1.0
    assert eleven.standing(11.0) == eleven.standing(10.0) == 0.0
    assert shape([0.5, 0.4], FLOOR).bottom == FLOOR  # a short list: its floor
    noisy = shape([0.35, 0.34, 0.33, 0.32, 0.31, 0.3, 0.3, 0.3, 0.29, 0.28], FLOOR)
    assert noisy.bottom == FLOOR  # above the tenth score
    assert shape([0.5, 0.5]).standing(0.5) == 1.0


def test_only_the_top_of_both_lists_equally_clear_scores_one_and_every_score_is_0_to_1():
    lexical = [(1, 20.0), *[(n, 10.0 - n / 10) for n in range(2, 12)]]
    dense = [(key, score / 25) for key, score in lexical]  # cosines as clear as the full text
    equally_clear = fuse({"lexical": lexical, "semantic": dense}, 20)
    assert equally_clear[0].key == 1 and equally_clear[0].score == pytest.approx(1.0)
    assert all(0.0 <= f.score < 1.0 for f in equally_clear[1:])
    # The same top in both lists, the dense one flatter: the top scores less than 1 (rank
    # fusion gave 1.0 to whatever was first in both).
    flat = [(1, 0.55), *[(n, 0.54 - n / 1000) for n in range(2, 12)]]
    fused = fuse({"lexical": lexical, "semantic": flat}, 20, floors={"semantic": FLOOR})
    assert fused[0].key == 1 and 0.5 < fused[0].score < 0.9
    assert all(0.0 <= f.score <= 1.0 for f in fused)


# multilingual-e5's noise cosine: unrelated texts sit at 0.79-0.83 (documents/embedders/e5.py).
E5_FLOOR = 0.79
# Eleven e5 cosines, 0.01 apart from 0.90 down: the 5th is 0.86, the 10th 0.81.
E5_LIST = [0.90 - n / 100 for n in range(11)]


def test_e5_measures_separation_above_its_floor_against_the_tenth_score():
    e5 = E5Embedder.fusion_separation
    assert e5 == Separation(rank=10, above_floor=True)
    # (1st - 10th) / (1st - floor) = 0.09 / 0.11; the shipped measure, (1st - 5th) / 1st,
    # calls the same list flat: 0.04 / 0.90.
    assert shape(E5_LIST, E5_FLOOR, e5).separation == pytest.approx(0.09 / 0.11)
    assert shape(E5_LIST, E5_FLOOR).separation == pytest.approx(0.04 / 0.90)
    # Shorter than ten: the missing scores are at the floor, the whole height.
    assert shape([0.88, 0.85], E5_FLOOR, e5).separation == pytest.approx(1.0)
    # Full text's floor is 0: (1st - 10th) / 1st.
    assert shape([float(n) for n in range(20, 9, -1)], 0.0, e5).separation == pytest.approx((20 - 11) / 20)
    # Nothing above the floor: no separation (a search never passes one: it drops them).
    assert shape([0.79, 0.78], E5_FLOOR, e5).separation == 0.0
    # The standing is measured as before, whatever the separation.
    assert shape(E5_LIST, E5_FLOOR, e5).bottom == shape(E5_LIST, E5_FLOOR).bottom == pytest.approx(0.81)


def test_with_e5s_measure_a_clear_dense_winner_is_not_taken_for_a_flat_list():
    # The full text finds the words everywhere alike (5.0 down to 4.1); e5 finds page 7 at 0.87,
    # four hundredths above the rest, all of them above the noise. Against its first cosine the
    # dense list leads its 5th by 5% (flatter than the full text's 8%) and page 1, first in the
    # full text, stays first; above the floor it leads by 60% of its height, and page 7 wins.
    lexical = [(n, 5.1 - n / 10) for n in range(1, 11)]
    dense = [(7, 0.87), (1, 0.83), *[(n, 0.83 - (n - 10) / 1000) for n in range(11, 19)]]
    lists = {"lexical": lexical, "semantic": dense}
    shipped = fuse(lists, 5, floors={"semantic": E5_FLOOR})
    assert shipped[0].key == 1
    e5 = fuse(lists, 5, floors={"semantic": E5_FLOOR}, separation=E5Embedder.fusion_separation)
    assert e5[0].key == 7
    assert e5[0].ranks == {"lexical": 7, "semantic": 1}


def test_minilm_keeps_the_shipped_measure_and_its_scores():
    assert LocalModelEmbedder.fusion_separation == SHIPPED == Separation(rank=5, above_floor=False)
    scores = [0.53, 0.52, 0.52, 0.51, 0.5, 0.45]
    # (1st - 5th) / 1st, computed exactly as before the measure became the embedder's.
    assert shape(scores, FLOOR, LocalModelEmbedder.fusion_separation).separation == (0.53 - 0.5) / 0.53
    lexical = [(1, 20.0), (2, 10.0), *[(n, 9.0 - n / 10) for n in range(3, 12)]]
    dense = [(2, 0.53), *[(n, 0.53 - n / 400) for n in range(12, 21)]]
    minilm = fuse(
        {"lexical": lexical, "semantic": dense},
        4,
        floors={"semantic": FLOOR},
        separation=LocalModelEmbedder.fusion_separation,
    )
    # The fused scores of this query before the change, to the last bit.
    assert [(f.key, f.score) for f in minilm] == [
        (1, 0.5),
        (2, 0.14485917418649163),
        (3, 0.029166666666666636),
        (4, 0.024999999999999984),
    ]


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
    # One list alone (lexical or semantic mode) ranks by itself: its first hit is 1.0, the others
    # where their score stands (a short list: from 0, full text's floor).
    alone = fuse({"lexical": [(1, 1.0), (2, 0.5)]}, 2)
    assert [f.score for f in alone] == pytest.approx([1.0, 0.5])


def test_a_zero_weight_leaves_the_other_list_in_charge():
    fused = fuse({"lexical": LEXICAL, "semantic": NOISE}, 10, weights=Weights(text=1.0, embedding=0.0))
    assert [f.key for f in fused][:3] == [1, 2, 3]
    fused = fuse({"lexical": LEXICAL, "semantic": NOISE}, 10, weights=Weights(text=0.0, embedding=1.0))
    assert [f.key for f in fused][:3] == [2, 5, 6]
    # A list without a say makes the other no less clear: the dense list alone counts in full,
    # though the full text (weighed 0) is the clearer of the two.
    fused = fuse(
        {"lexical": LEXICAL, "semantic": NOISE},
        10,
        weights=Weights(text=0.0, embedding=1.0),
        floors={"semantic": FLOOR},
    )
    assert fused[0].key == 2 and fused[0].score == pytest.approx(1.0)
    assert [f.score for f in fused if f.key in (1, 3)] == [0.0, 0.0]
    # Nor does a dense list the embedder cannot be trusted with (a script it does not read).
    clear_noise = [(2, 0.9), (5, 0.31)]
    fused = fuse({"lexical": LEXICAL, "semantic": clear_noise}, 10, confidence={"semantic": 0.0})
    assert fused[0].key == 1 and fused[0].score == pytest.approx(0.5)


@pytest.mark.parametrize(("text", "embedding"), [(0.0, 0.0), (1.5, 1.0), (1.0, -0.1)])
def test_weights_are_0_to_1_and_not_both_0(text, embedding):
    with pytest.raises(ValueError, match="weight"):
        Weights(text=text, embedding=embedding)
