"""Better hits: stop words neither select nor rank a hit on their own and are never highlighted;
highlights fall on word boundaries, and on whole matched runs of CJK text."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from documents.models import DocumentVersion
from documents.retrieval.text import highlight_spans, query_tokens
from documents.search import search, snippet
from documents.templatetags.search_marks import highlight
from jobs.models import Status
from tests.documents.helpers import make_tenant, run_until_idle, upload


def marked(text: str, query: str) -> str:
    return str(highlight(text, query))


def test_a_query_asks_for_its_words_without_the_stop_words() -> None:
    assert query_tokens("someone who writes down the weather at a lighthouse") == [
        "someone",
        "writes",
        "weather",
        "lighthouse",
    ]


def test_a_query_of_stop_words_alone_keeps_them() -> None:
    assert query_tokens("The Who") == ["the", "who"]
    assert query_tokens("to be or not to be") == ["to", "be", "or", "not"]


def test_a_highlight_never_marks_part_of_a_word() -> None:
    text = "The platform at the lighthouse; lighthouses and a relighthouse."
    assert marked(text, "at the lighthouse") == (
        "The platform at the <mark>lighthouse</mark>; lighthouses and a relighthouse."
    )
    # Stop words alone: marked, but as words only ("at" inside "platform" is not).
    assert marked(
        text, "at the"
    ) == "<mark>The</mark> platform <mark>at</mark> <mark>the</mark> lighthouse; " + (
        "lighthouses and a relighthouse."
    )


def test_a_highlight_is_escaped_and_case_insensitive() -> None:
    assert marked("<b>Lighthouse</b> & keeper", "LIGHTHOUSE keeper") == (
        "&lt;b&gt;<mark>Lighthouse</mark>&lt;/b&gt; &amp; <mark>keeper</mark>"
    )


def test_a_chinese_query_marks_the_matched_run_whole() -> None:
    text = "灯塔看守人在灯塔上记录天气。"
    assert marked(text, "灯塔看守") == "<mark>灯塔看守</mark>人在<mark>灯塔</mark>上记录天气。"
    # A Latin word next to Chinese text is still a word of its own.
    assert marked("使用Python开发", "python") == "使用<mark>Python</mark>开发"
    assert highlight_spans("天气很好", "灯塔") == []


def test_a_snippet_starts_near_a_word_not_inside_another_one() -> None:
    text = "platform " * 60 + "the lighthouse keeper"
    assert "lighthouse" in snippet(text, "at lighthouse", width=60)


@pytest.mark.django_db(transaction=True)
def test_a_page_sharing_only_stop_words_with_the_query_is_not_a_full_text_hit(
    settings, tmp_path: Path
) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    tenant = make_tenant()
    texts = {
        "keeper.txt": b"Every evening someone writes the weather into the lighthouse ledger.",
        "station.txt": b"We waited at the platform of the station for the night train.",
        "ferries.txt": b"Ferries cross the bay at dawn and at dusk.",
    }
    versions = {}
    for name, data in texts.items():
        result = upload(tenant, data, name)
        assert result.job is not None and run_until_idle(result.job.pk).status == Status.READY
        versions[result.version.pk] = name
    query = "someone who writes down the weather at a lighthouse"
    hits = search(tenant, query, k=10, mode="lexical")
    assert [versions[hit.version_id] for hit in hits] == ["keeper.txt"]
    # A query of stop words only still finds them.
    found = {versions[hit.version_id] for hit in search(tenant, "at the", k=10, mode="lexical")}
    assert found == set(texts)
    assert DocumentVersion.objects.count() == 3


def _bounded_pattern_spans(text: str, query: str) -> list[tuple[int, int]]:
    """The words' marks as a pattern of the query's words between word bounds finds them (the
    rule the marks follow, written as one expression): the reference for the whole-word scan."""
    import re

    from documents.retrieval.text import _CJK, _CJK_RUN, highlight_terms

    words = [t for t in highlight_terms(query) if not _CJK_RUN.fullmatch(t)]
    if not words:
        return []
    alternatives = "|".join(re.escape(w) for w in words)
    bounds = (rf"(?<![^\W_{_CJK}])", rf"(?![^\W_{_CJK}])")
    pattern = re.compile(f"{bounds[0]}(?:{alternatives}){bounds[1]}", re.IGNORECASE)
    return [m.span() for m in pattern.finditer(text)]


_PIECES = ["at", "At", "platform", "data", "database", "x1", "lighthouse", "é", "café", "-", " ",
           ".", "_", "灯塔", "中", "Ωmega", "ωmega", "2024", "\n"]  # fmt: skip


@given(
    st.lists(st.sampled_from(_PIECES), max_size=14).map("".join),
    st.lists(st.sampled_from([p for p in _PIECES if p not in "灯塔中"]), min_size=1, max_size=5).map(
        " ".join
    ),
)
@settings(max_examples=300, deadline=None)
def test_words_are_marked_exactly_where_a_bounded_pattern_finds_them(text: str, query: str) -> None:
    # Queries of words only: a CJK run's marks join the word marks they touch.
    assert highlight_spans(text, query) == _bounded_pattern_spans(text, query), (text, query)
