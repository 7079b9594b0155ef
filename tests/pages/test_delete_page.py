"""Deleting from the pages: a link to a confirmation page (works without JavaScript), a POST that
needs the CSRF token, then the document is gone from the list and from search; another tenant's
document is a 404."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client

from documents.models import Deletion
from tests.documents import files
from tests.documents.helpers import files_under, run_until_idle
from tests.pages.helpers import Member, text_pdf

PHRASE = "Saffron lantern above the ferry dock"

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def media(settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return Path(settings.MEDIA_ROOT)


def test_the_document_page_links_to_a_confirmation_whose_post_deletes(alice: Member, media: Path):
    result = alice.upload(files.text_pdf([f"{PHRASE}."]), "harbor.pdf", "Harbor notes")
    assert result.job is not None
    run_until_idle(result.job.pk)
    link = f'href="/documents/{result.document.pk}/"'
    assert link in alice.client.get("/search", {"q": PHRASE}).content.decode()
    page = alice.client.get(f"/documents/{result.document.pk}/").content.decode()
    assert f'href="/documents/{result.document.pk}/delete"' in page

    confirm = alice.client.get(f"/documents/{result.document.pk}/delete")
    assert confirm.status_code == 200
    assert b"csrfmiddlewaretoken" in confirm.content and b"Delete this document?" in confirm.content
    assert Deletion.objects.count() == 0  # asking is not deleting

    response = alice.client.post(f"/documents/{result.document.pk}/delete")

    assert response.status_code == 303 and response["Location"] == "/"
    listing = alice.client.get("/").content.decode()
    assert "no longer appears in search" in listing and link not in listing
    assert alice.client.get(f"/documents/{result.document.pk}/").status_code == 404
    assert link not in alice.client.get("/search", {"q": PHRASE}).content.decode()
    assert Deletion.objects.get(document_id=result.document.pk).via == "page"
    assert files_under(media) == []


def test_the_delete_post_needs_the_csrf_token(alice: Member):
    result = alice.upload(text_pdf(), "harbor.pdf")
    strict = Client(enforce_csrf_checks=True)
    strict.cookies = alice.client.cookies
    assert strict.post(f"/documents/{result.document.pk}/delete").status_code == 403
    assert Deletion.objects.count() == 0


def test_another_tenants_document_cannot_be_deleted_from_the_pages(alice: Member, bob: Member):
    result = alice.upload(text_pdf(), "harbor.pdf")
    assert bob.client.get(f"/documents/{result.document.pk}/delete").status_code == 404
    assert bob.client.post(f"/documents/{result.document.pk}/delete").status_code == 404
    assert Deletion.objects.count() == 0
