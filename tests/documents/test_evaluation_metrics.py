"""The ranking metrics against values computed by hand (no database)."""

from __future__ import annotations

import math

import pytest

from documents.evaluation.metrics import mean, paired_difference, score, t95

LOG2_3 = math.log2(3)
LOG2_4 = 2.0


def test_first_hit_relevant_scores_one_everywhere():
    assert score([{"d1"}, {"x"}], {"d1": 1}) == {
        "recall@1": 1.0,
        "recall@3": 1.0,
        "recall@10": 1.0,
        "mrr@10": 1.0,
        "ndcg@10": 1.0,
    }


def test_relevant_items_found_at_ranks_two_and_three():
    # Labels a (grade 1), b (grade 1), c (grade 1); the answer finds b at 2 and a at 3.
    figures = score([{"x"}, {"b"}, {"a"}, {"y"}], {"a": 1, "b": 1, "c": 1})
    assert figures["recall@1"] == 0.0
    assert figures["recall@3"] == pytest.approx(2 / 3)
    assert figures["recall@10"] == pytest.approx(2 / 3)
    assert figures["mrr@10"] == pytest.approx(0.5)
    # DCG = 1/log2(3) + 1/log2(4); ideal = 1 + 1/log2(3) + 1/log2(4)
    dcg = 1 / LOG2_3 + 1 / LOG2_4
    ideal = 1 + 1 / LOG2_3 + 1 / LOG2_4
    assert figures["ndcg@10"] == pytest.approx(dcg / ideal)


def test_graded_labels_use_exponential_gain():
    # a grade 3 found at 2, b grade 1 found at 1: DCG = 1/1 + 7/log2(3); ideal = 7/1 + 1/log2(3)
    figures = score([{"b"}, {"a"}], {"a": 3, "b": 1})
    assert figures["ndcg@10"] == pytest.approx((1 + 7 / LOG2_3) / (7 + 1 / LOG2_3))
    assert figures["mrr@10"] == 1.0


def test_a_relevant_item_counts_once_however_many_hits_match_it():
    # Three chunks of document d1 (one label): recall 1, not 3; the repeats gain nothing.
    figures = score([{"d1", "c1"}, {"d1", "c2"}, {"d1", "c3"}], {"d1": 1})
    assert figures["recall@3"] == 1.0
    assert figures["ndcg@10"] == 1.0


def test_nothing_found_and_beyond_the_cutoff_score_zero():
    answer = [{"x"}] * 10 + [{"a"}]
    figures = score(answer, {"a": 1})
    assert figures == {"recall@1": 0.0, "recall@3": 0.0, "recall@10": 0.0, "mrr@10": 0.0, "ndcg@10": 0.0}


def test_grade_zero_labels_are_not_relevant():
    assert score([{"a"}, {"b"}], {"a": 0, "b": 1})["mrr@10"] == 0.5


def test_mean_over_queries():
    rows = [score([{"a"}], {"a": 1}), score([{"x"}, {"a"}], {"a": 1})]
    summary = mean(rows)
    assert summary.queries == 2
    assert summary.figures["mrr@10"] == pytest.approx(0.75)
    assert summary.figures["recall@1"] == pytest.approx(0.5)
    assert mean([]).figures["ndcg@10"] == 0.0


def test_a_paired_difference_and_its_interval_by_hand():
    # Four queries' reciprocal ranks before and after: differences 0, 0.5, 0.5, 0; mean 0.25,
    # sample deviation sqrt(4 * 0.0625 / 3), standard error that over 2, t(3 freedoms) 3.182.
    change = paired_difference([1.0, 0.5, 0.0, 1.0], [1.0, 1.0, 0.5, 1.0])
    assert change is not None and change.queries == 4
    half = 3.182 * math.sqrt(0.25 / 3) / 2
    assert (change.mean, change.low, change.high) == pytest.approx((0.25, 0.25 - half, 0.25 + half))
    assert change.low == pytest.approx(-0.20928, abs=1e-5)
    assert change.verdict == "unclear"  # two of four queries gained: not clear of the noise


def test_a_change_most_queries_agree_on_is_clear_either_way():
    # Five of six queries gain 0.5, one nothing: mean 5/12, deviation sqrt(1/24), t(5) 2.571.
    before, after = [0.5] * 6, [1.0, 1.0, 1.0, 1.0, 1.0, 0.5]
    gained = paired_difference(before, after)
    assert gained is not None
    half = 2.571 * math.sqrt(1 / 24) / math.sqrt(6)
    assert (gained.mean, gained.low) == pytest.approx((5 / 12, 5 / 12 - half))
    assert gained.low == pytest.approx(0.20242, abs=1e-5) and gained.verdict == "better"
    lost = paired_difference(after, before)
    assert lost is not None and lost.high == pytest.approx(-gained.low) and lost.verdict == "worse"
    # No change at all is no clear change; one query is too few to tell.
    same = paired_difference([0.5, 1.0], [0.5, 1.0])
    assert same is not None and (same.low, same.high, same.verdict) == (0.0, 0.0, "unclear")
    assert paired_difference([0.5], [1.0]) is None


def test_t_is_never_narrower_than_the_exact_value():
    assert (t95(1), t95(30)) == (12.706, 2.042)
    assert t95(35) == 2.042 and t95(40) == 2.021 and t95(59) == 2.021  # exact 2.030, 2.021, 2.001
    assert t95(100) == 2.000 and t95(299) == 1.980  # exact 1.984, 1.968
