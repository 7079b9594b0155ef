"""The labelled relevance set is well-formed, and its scorer counts hits the way it says."""

from collections import Counter

from tests.documents.relevance import SCORED_KINDS, load_corpus, load_queries, score


def test_relevance_set_has_the_promised_mix():
    corpus = load_corpus()
    queries = load_queries()
    ids = [doc["id"] for doc in corpus]
    assert len(ids) == len(set(ids))
    assert 25 <= len(corpus) <= 40
    assert Counter(doc["lang"] for doc in corpus)["zh"] >= len(corpus) // 4
    kinds = Counter(query["kind"] for query in queries)
    assert kinds["exact"] >= 10
    assert kinds["paraphrase"] >= 14
    assert kinds["chinese"] >= 12
    assert sum(kinds[kind] for kind in SCORED_KINDS) >= 36
    for query in queries:
        assert set(query["relevant"]) <= set(ids), query


def test_each_exact_token_occurs_once_in_the_corpus_inside_its_relevant_document():
    corpus = load_corpus()
    for query in load_queries("exact"):
        holders = [doc["id"] for doc in corpus if query["q"] in doc["text"]]
        assert holders == query["relevant"], query
        assert sum(doc["text"].count(query["q"]) for doc in corpus) == 1, query


def test_score_counts_first_occurrence_of_each_document_and_skips_unrelated_queries():
    queries = [
        {"q": "a", "kind": "exact", "relevant": ["d1"]},
        {"q": "b", "kind": "exact", "relevant": ["d2"]},
        {"q": "c", "kind": "unrelated", "relevant": []},
    ]
    rankings = {"a": ["d1", "d9"], "b": ["d9", "d9", "d8", "d2"]}

    result = score(lambda text: rankings[text], queries)

    assert set(result) == {"exact"}
    # "b": d9 repeated counts once, so d2 is third, a top-3 hit but not a first.
    assert result["exact"].hit_at_1 == 0.5
    assert result["exact"].hit_at_3 == 1.0
    assert result["exact"].misses_at_3 == ()
