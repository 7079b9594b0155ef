"""The documents list: filter by state, title search, sort, pagination that keeps them, and a
document with a new version moving up (order by last activity)."""

from __future__ import annotations

import re

import pytest

from jobs.services.lifecycle import job_cancel
from tests.documents.files import text_pdf
from tests.pages.helpers import Member, html, job_id_of, queued, ready

pytestmark = pytest.mark.django_db(transaction=True)


def titles(body: str) -> list[str]:
    return re.findall(r'<th scope="row"[^>]*>\s*<a href="[^"]+">([^<]+)</a>', body)


def test_a_document_with_a_new_version_moves_up_and_the_other_orders_sort(alice: Member):
    first = ready(alice, title="Alpha notes")
    queued(alice, title="Beta notes")
    queued(alice, title="Gamma notes")
    assert titles(html(alice.client.get("/"))) == ["Gamma notes", "Beta notes", "Alpha notes"]

    alice.upload_version(first, text_pdf(("A second version of the alpha notes.",)))

    assert titles(html(alice.client.get("/"))) == ["Alpha notes", "Gamma notes", "Beta notes"]
    assert titles(html(alice.client.get("/?ordering=-created"))) == [
        "Gamma notes",
        "Beta notes",
        "Alpha notes",
    ]
    assert titles(html(alice.client.get("/?ordering=title"))) == ["Alpha notes", "Beta notes", "Gamma notes"]
    assert titles(html(alice.client.get("/?ordering=-title"))) == ["Gamma notes", "Beta notes", "Alpha notes"]
    assert titles(html(alice.client.get("/?ordering=bogus"))) == ["Alpha notes", "Gamma notes", "Beta notes"]


def test_filter_by_state_and_title(alice: Member):
    ready(alice, title="Harbor ready")
    queued(alice, title="Harbor waiting")
    cancelled = queued(alice, title="Lighthouse stopped")
    job_cancel(job_id=job_id_of(cancelled))

    body = html(alice.client.get("/?state=cancelled"))
    assert titles(body) == ["Lighthouse stopped"]
    assert '<option value="cancelled" selected>Cancelled</option>' in body
    assert titles(html(alice.client.get("/?q=harbor"))) == ["Harbor waiting", "Harbor ready"]
    assert titles(html(alice.client.get("/?q=HARBOR&state=ready"))) == ["Harbor ready"]
    empty = html(alice.client.get("/?q=nothing-like-this"))
    assert "No document matches these filters." in empty and 'href="/">Show all</a>' in empty


def test_pagination_keeps_the_filters(alice: Member, settings, monkeypatch):
    monkeypatch.setattr("documents.pages.document_list.DOCUMENTS_PER_PAGE", 2)
    for i in range(5):
        queued(alice, title=f"Report {i}")
    body = html(alice.client.get("/?q=report&ordering=title"))
    assert titles(body) == ["Report 0", "Report 1"]
    assert "Page 1 of 3" in body
    next_link = re.search(r'<a href="([^"]+)">Next</a>', body)
    assert next_link is not None
    second = html(alice.client.get(next_link.group(1).replace("&amp;", "&")))
    assert titles(second) == ["Report 2", "Report 3"]


def test_the_document_pages_search_box_searches_that_document(alice: Member):
    result = ready(alice, title="Harbor notes")
    body = html(alice.client.get(f"/documents/{result.document.pk}/"))
    form = re.search(r'<form class="search-inline" action="/search" method="get".*?</form>', body, re.S)
    assert form is not None
    assert f'<input type="hidden" name="document_ids" value="{result.document.pk}">' in form.group(0)
    assert 'placeholder="Search this document"' in form.group(0)


def test_the_new_version_form_says_what_happens_to_the_title(alice: Member):
    result = ready(alice, title="Harbor notes")
    body = html(alice.client.get(f"/documents/{result.document.pk}/"))
    assert "Optional. Empty keeps the current title; a title given here replaces it." in body
    assert "The file name is used when empty." not in body
    alice.upload_version(result, text_pdf(("Second version.",)))
    assert "Harbor notes" in html(alice.client.get(f"/documents/{result.document.pk}/"))
