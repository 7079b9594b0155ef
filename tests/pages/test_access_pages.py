"""The HTML pages apply access lists: a document the member may not see is a 404 like a missing
one on its pages, and is in no list, collection count or search result."""

from __future__ import annotations

import uuid

import pytest

from documents.models import Document
from documents.selectors import viewer_for
from documents.services.access import document_access_set
from documents.services.groups import membership_set_admin
from tests.documents.files import PAGE_PHRASES, text_pdf
from tests.pages.helpers import Member, html, make_member, ready

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_invisible_document_is_missing_from_every_page(alice: Member):
    carol = make_member("carol", "acme")
    shown = ready(alice, title="Shown notes")
    hidden = ready(alice, text_pdf(), title="Hidden notes")
    user = alice.user
    membership_set_admin(membership=user.memberships.get(), is_admin=True)
    document_access_set(
        viewer=viewer_for(user, alice.tenant),
        document=Document.objects.get(pk=hidden.document.pk),
        inherit=False,
        principals=[f"user:{user.pk}"],
        user=user,
    )
    doc, missing = hidden.document.pk, uuid.uuid4()
    for url in (
        "/documents/{}/",
        "/documents/{}/delete",
        "/documents/{}/versions/1/chunks",
    ):
        seen, absent = carol.client.get(url.format(doc)), carol.client.get(url.format(missing))
        assert seen.status_code == absent.status_code == 404, url
        assert alice.client.get(url.format(doc)).status_code == 200, url

    listing = html(carol.client.get("/"))
    assert "Shown notes" in listing and "Hidden notes" not in listing
    assert "Hidden notes" in html(alice.client.get("/"))
    results = html(carol.client.get("/search", {"q": PAGE_PHRASES[1], "mode": "lexical"}))
    assert "Shown notes" in results and "Hidden notes" not in results
    collection = Document.objects.get(pk=shown.document.pk).collection_id
    page = html(carol.client.get(f"/collections/{collection}/"))
    assert "Shown notes" in page and "Hidden notes" not in page
