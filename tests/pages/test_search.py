"""The search page, and the highlighting of query terms in snippets."""

from __future__ import annotations

import pytest

from documents.templatetags.search_marks import highlight
from tests.documents.files import PAGE_PHRASES, text_pdf
from tests.pages.helpers import Member, html, ready


def test_terms_are_marked_case_insensitively_and_everything_else_is_escaped():
    marked = highlight("Amber <b>falcon</b> & AMBER", "amber")
    assert marked == "<mark>Amber</mark> &lt;b&gt;falcon&lt;/b&gt; &amp; <mark>AMBER</mark>"


def test_a_term_that_spells_part_of_an_entity_does_not_break_it():
    assert highlight("salt & amp", "amp") == "salt &amp; <mark>amp</mark>"


def test_html_in_the_query_is_never_echoed_as_markup():
    assert (
        highlight("<script>x</script>", "<script>")
        == "&lt;<mark>script</mark>&gt;x&lt;/<mark>script</mark>&gt;"
    )


def test_without_terms_the_text_is_only_escaped():
    assert highlight("<i>a</i>", "") == "&lt;i&gt;a&lt;/i&gt;"


def test_chinese_runs_are_marked():
    assert highlight("港口的渔船已经出发。", "渔船") == "港口的<mark>渔船</mark>已经出发。"


@pytest.mark.django_db(transaction=True)
def test_results_show_document_version_page_and_the_marked_snippet(alice: Member, bob: Member):
    mine = ready(alice, title="Field <b>guide</b>")
    ready(bob, text_pdf(["Cobalt harbor belongs to another tenant."]), title="Bob's harbor")
    response = alice.client.get("/search", {"q": "cobalt harbor"})
    assert response.status_code == 200
    body = html(response)
    assert 'value="cobalt harbor"' in body
    assert f'<a href="/documents/{mine.document.pk}/">Field &lt;b&gt;guide&lt;/b&gt;</a>' in body
    assert "Version 1" in body
    assert "pages 1\N{EN DASH}3" in body  # three short pages make one chunk
    assert "<mark>Cobalt</mark> <mark>harbor</mark>" in body
    assert PAGE_PHRASES[1].split()[2] in body
    assert "another tenant" not in body
    assert "Bob&#x27;s harbor" not in body


@pytest.mark.django_db(transaction=True)
def test_an_empty_query_shows_just_the_box_and_nothing_found_says_why(alice: Member):
    empty = html(alice.client.get("/search"))
    assert '<input type="search" id="search-q" name="q" value=""' in empty
    assert "result" not in empty.split("</form>", 2)[-1]
    nothing = html(alice.client.get("/search", {"q": "zeppelin"}))
    assert "0 results" in nothing
    assert "Nothing found in your published documents." in nothing


@pytest.mark.django_db(transaction=True)
def test_the_mode_is_chosen_on_the_page_and_each_hit_shows_its_scores(alice: Member):
    ready(alice, title="Field guide")
    body = html(alice.client.get("/search", {"q": "cobalt harbor", "mode": "lexical"}))
    assert '<option value="lexical" selected>' in body
    scores = body.split('data-field="scores">', 1)[1].split("</p>", 1)[0]
    assert "Score 1.000" in scores and "words #1" in scores and "meaning" not in scores
    hybrid = html(alice.client.get("/search", {"q": "cobalt harbor"}))
    assert '<option value="hybrid" selected>' in hybrid
    assert "words #1" in hybrid and "meaning #1" in hybrid


@pytest.mark.django_db(transaction=True)
def test_an_attribute_filter_narrows_the_results_and_a_bad_one_says_what_is_wrong(alice: Member):
    ready(alice, title="Field guide")
    narrowed = html(
        alice.client.get(
            "/search", {"q": "cobalt harbor", "filters": '{"type": "eq", "key": "dept", "value": "x"}'}
        )
    )
    assert "0 results" in narrowed
    bad = html(alice.client.get("/search", {"q": "cobalt harbor", "filters": '{"type": "near"}'}))
    assert 'data-field="filter-error"' in bad
    assert 'aria-invalid="true"' in bad
    assert "Traceback" not in bad and "results" not in bad.split("</form>", 2)[-1]
