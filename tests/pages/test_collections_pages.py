"""Collections and inspection on the pages: a collections list with counts and a create form, a
collection's page with its documents, the upload form's collection picker, the documents list
filtered by collection, and a version's chunks page with the published text's download link;
another tenant's collection or version is a 404."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from documents.models import Collection, Document
from tests.documents import files
from tests.documents.helpers import run_until_idle
from tests.pages.helpers import Member

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def media(settings, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"


def test_create_a_collection_upload_into_it_and_see_its_counts(alice: Member, bob: Member):
    response = alice.client.post("/collections/", {"name": "Contracts", "description": "Signed"})
    assert response.status_code == 303
    contracts = Collection.objects.get(name="Contracts")
    assert response["Location"] == f"/collections/{contracts.pk}/"

    upload_page = alice.client.get("/", {"collection": str(contracts.pk)}).content.decode()
    assert f'<option value="{contracts.pk}" selected>' in upload_page
    posted = alice.client.post(
        "/",
        {
            "file": SimpleUploadedFile("falcon.pdf", files.text_pdf(["Amber falcon contract."])),
            "collection": str(contracts.pk),
        },
    )
    assert posted.status_code == 303
    document = Document.objects.get(collection=contracts)
    run_until_idle(document.latest_version.job_id)  # type: ignore[union-attr]
    alice.upload(files.text_pdf(["Elsewhere."]), "other.pdf", "Other")  # the default collection

    page = alice.client.get(f"/collections/{contracts.pk}/").content.decode()
    assert "Amber falcon contract" not in page and "falcon" in page  # the document's title
    assert "1 documents: 1 ready" in page
    listing = alice.client.get("/collections/").content.decode()
    assert "Contracts" in listing and "Default" in listing
    filtered = alice.client.get("/", {"collection": str(contracts.pk)}).content.decode()
    assert (
        f'href="/documents/{document.pk}/"' in filtered and "Other" not in filtered.split("documents-list")[1]
    )

    assert bob.client.get(f"/collections/{contracts.pk}/").status_code == 404
    assert bob.client.get("/", {"collection": str(contracts.pk)}).status_code == 404
    assert "Contracts" not in bob.client.get("/collections/").content.decode()


def test_a_versions_chunks_page_and_the_text_download_link(alice: Member, bob: Member):
    result = alice.upload(
        files.text_pdf(["Saffron lantern page one.", "Page two."]), "lantern.pdf", "Lantern"
    )
    assert result.job is not None
    run_until_idle(result.job.pk)
    detail = alice.client.get(f"/documents/{result.document.pk}/").content.decode()
    chunks_url = f"/documents/{result.document.pk}/versions/1/chunks"
    text_url = f"/api/documents/{result.document.pk}/versions/1/text"
    assert f'href="{chunks_url}"' in detail and f'href="{text_url}"' in detail

    page = alice.client.get(chunks_url)
    assert page.status_code == 200
    assert "Saffron lantern page one." in page.content.decode()
    download = alice.client.get(text_url)  # the pages' session works for the download too
    assert download.status_code == 200 and "Saffron lantern" in download.content.decode()
    assert bob.client.get(chunks_url).status_code == 404
