"""The pure parts of retrieval: the text the full-text index and the query see, the terms BM25
scores, and the fusion of the lists."""

from __future__ import annotations

import math

import pytest

from documents.retrieval.backends import DF_CAP, N_CAP, scoring_terms
from documents.retrieval.fusion import fuse
from documents.retrieval.sqlite_fts import index_terms
from documents.retrieval.text import (
    MAX_QUERY_TERMS,
    _search_text_any,
    query_tokens,
    search_text,
    tsquery,
)


def test_cjk_runs_are_indexed_as_characters_and_bigrams_and_words_stay_words():
    assert search_text("GPU加速的 Search-Engine") == "gpu 加 速 的 加速 速的 search engine"


def test_ascii_text_is_indexed_by_its_shortcut_exactly_as_by_the_general_rule():
    every_ascii = "".join(chr(c) for c in range(128))
    texts = [
        every_ascii,
        every_ascii[::-1],
        "Section 12: the_QUICK brown-fox (v2.0) costs $3,50; e.g. USB-C\tports\r\n",
        "",
        "___",
        " ".join(every_ascii[i : i + 7] for i in range(0, 128, 3)),
    ]
    for text in texts:
        assert text.isascii()
        assert search_text(text) == _search_text_any(text)
    assert search_text("the_QUICK fox9") == "the quick fox9"


def test_a_cjk_query_looks_up_its_bigrams_and_a_single_character_itself():
    assert query_tokens("春天的果园") == ["春天", "天的", "的果", "果园"]
    assert query_tokens("港") == ["港"]
    assert query_tokens("Amber 港口 amber") == ["amber", "港口"]


def test_every_query_bigram_is_a_token_of_the_indexed_text_it_came_from():
    text = "第一页。春天的果园很安静。"
    indexed = set(search_text(text).split())
    assert set(query_tokens("的果园很安")) <= indexed


def test_query_terms_are_words_never_operators():
    tokens = query_tokens('NEAR OR "x" AND o\'brien')
    assert tokens == ["near", "x", "o", "brien"]  # "or", "and": stop words
    assert query_tokens("OR AND") == ["or", "and"]  # nothing else: kept
    # SQLite looks each one up as a term of its vocabulary (no query syntax at all); PostgreSQL
    # gets each quoted.
    assert index_terms(["near", "or"]) == ["near", "or"]
    assert tsquery(["o'x"]) == "'o''x'"


def test_query_words_become_the_full_text_index_terms_as_its_tokenizer_folds_them():
    # FTS5's unicode61 with diacritics removed: what the index holds for the same words.
    assert index_terms(["café", "crème", "ΣΊΣΥΦΟΣ", "渔船", "cafe"]) == ["cafe", "creme", "σίσυφοσ", "渔船"]
    assert index_terms([]) == []
    assert index_terms(["x"]) == ["x"]  # the scratch table kept nothing of the call before


def test_a_pasted_paragraph_is_cut_to_a_bounded_number_of_terms():
    assert len(query_tokens(" ".join(f"word{n}" for n in range(500)))) == MAX_QUERY_TERMS


def test_first_in_both_lists_scores_one_and_the_others_by_where_their_scores_stand():
    fused = fuse({"lexical": [(1, 9.0), (2, 3.0)], "semantic": [(1, 0.8), (3, 0.5)]}, k=10)
    by_key = {f.key: f for f in fused}
    assert by_key[1].score == pytest.approx(1.0)
    assert by_key[1].ranks == {"lexical": 1, "semantic": 1}
    assert by_key[1].scores == {"lexical": 9.0, "semantic": 0.8}
    # Half of (a third of the full text's top), and half of (5/8 of the dense top): the score,
    # not the rank, places each.
    assert by_key[2].score == pytest.approx(3.0 / 9.0 / 2)
    assert by_key[3].score == pytest.approx(0.5 / 0.8 / 2)
    assert [f.key for f in fused] == [1, 3, 2]


def test_fusion_honours_k_and_a_single_list_keeps_its_order():
    fused = fuse({"lexical": [(n, float(10 - n)) for n in range(10)]}, k=3)
    assert [f.key for f in fused] == [0, 1, 2]
    assert fused[0].score == pytest.approx(1.0)
    assert fuse({}, k=3) == []


def test_the_graph_pass_searches_enough_candidates_for_recall_even_when_the_whole_scope_is_near() -> None:
    from documents.retrieval import pgvector

    # Every probed vector in scope (an unfiltered search, or a 50 % scope near the query): the
    # share alone would ask for 10 x 10 = 100 candidates, which keep about half of the exact top
    # 10 of a million-vector graph (bench/README.md, "Search with access lists").
    # Sized for recall: pgvector's cap, whatever the share (400 kept 0.87 of the top 10 at 300k
    # on the benchmark's worst-case queries, 1,000 keeps 0.93).
    assert pgvector.ef_search_for(10, 1.0) == pgvector.MIN_EF_SEARCH == 1000
    assert pgvector.ef_search_for(10, 0.5) == 1000
    assert pgvector.ef_search_for(10, 0.1) == 1000
    assert pgvector.ef_search_for(50, 0.05) == pgvector.MAX_EF_SEARCH


def test_both_databases_leave_out_the_same_common_terms_in_a_large_tenant():
    # One rule for SQLite and PostgreSQL. SQLite once cut at a fifth of its entries or 20,000:
    # at 100,000 entries it kept a word in 6,000 of them, which PostgreSQL (whose counts stop at
    # DF_CAP) dropped, and it took idf from the uncapped total: the two ranked differently.
    n = 100_000
    df = {"rare": 12, "frequent": 6_000, "everywhere": 90_000, "missing": 0}
    scored = scoring_terms(n, df, ["frequent", "rare", "missing", "everywhere"])
    assert scored == [("rare", pytest.approx(math.log(1 + (N_CAP - 12 + 0.5) / 12.5)))]
    # Below the caps a fifth of the tenant is the line.
    assert [t for t, _ in scoring_terms(1_000, {"a": 200, "b": 201}, ["a", "b"])] == ["a"]
    # A query of common terms only: all of them score, their counts capped.
    capped = pytest.approx(math.log(1 + (N_CAP - DF_CAP + 0.5) / (DF_CAP + 0.5)))
    assert scoring_terms(n, {"x": 30_000, "y": 50_000}, ["x", "y"]) == [("x", capped), ("y", capped)]
