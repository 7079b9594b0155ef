"""Collections and inspection on the pages: a collections list with counts and a create form, a
collection's page with its documents, the upload form's collection picker, the documents list
filtered by collection, and a version's chunks page with the published text's download link;
another tenant's collection or version is a 404."""

from __future__ import annotations

import re
from html.parser import HTMLParser
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


def test_the_search_page_scopes_to_one_collection(alice: Member, bob: Member):
    from documents.services.collections import collection_create
    from documents.services.upload import document_upload

    notes = collection_create(tenant=alice.tenant, name="Notes")
    inside = document_upload(
        tenant=alice.tenant,
        data=files.text_pdf(["Cobalt tram in notes."]),
        filename="in.pdf",
        collection=notes,
    )
    outside = alice.upload(files.text_pdf(["Cobalt tram elsewhere."]), "out.pdf", "Elsewhere")
    for result in (inside, outside):
        assert result.job is not None
        run_until_idle(result.job.pk)

    everywhere = alice.client.get("/search", {"q": "cobalt tram"}).content.decode()
    scoped = alice.client.get("/search", {"q": "cobalt tram", "collection": str(notes.pk)}).content.decode()
    assert f"/documents/{outside.document.pk}/" in everywhere
    assert (
        f"/documents/{inside.document.pk}/" in scoped and f"/documents/{outside.document.pk}/" not in scoped
    )
    theirs = bob.client.get("/search", {"q": "cobalt tram", "collection": str(notes.pk)}).content.decode()
    assert f"/documents/{inside.document.pk}/" not in theirs and "Notes" not in theirs


class CellChildren(HTMLParser):
    """The direct children of the versions table's publication cells: tags, and text that is
    not blank (on a phone each of them is a grid item of its own)."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0  # inside a publication cell: 1 for the cell itself
        self.cells: list[list[str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.depth:
            if self.depth == 1:
                self.cells[-1].append(f"<{tag}>")
            self.depth += 1
        elif tag == "td" and ("data-cell", "role") in attrs:
            self.depth = 1
            self.cells.append([])

    def handle_endtag(self, tag: str) -> None:
        if self.depth:
            self.depth -= 1

    def handle_data(self, data: str) -> None:
        if self.depth == 1 and data.strip():
            self.cells[-1].append(data.strip())


def test_chunks_are_numbered_from_one_and_the_links_of_a_version_stay_together(alice: Member):
    result = alice.upload(
        files.text_pdf(["Saffron lantern page one.", "Page two."]), "lantern.pdf", "Lantern"
    )
    assert result.job is not None
    run_until_idle(result.job.pk)
    page = alice.client.get(f"/documents/{result.document.pk}/versions/1/chunks").content.decode()
    numbers = re.findall(r'<li class="card" value="(\d+)" data-ordinal="(\d+)"', page)
    assert numbers and numbers[0] == ("1", "0")
    assert all(int(shown) == int(ordinal) + 1 for shown, ordinal in numbers)

    detail = alice.client.get(f"/documents/{result.document.pk}/").content.decode()
    cells = CellChildren()
    cells.feed(detail)
    # The role, "Chunks · Extracted text" in one box: no "·" left alone beside the links.
    assert cells.cells == [["<div>"]]
