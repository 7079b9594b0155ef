"""Inspection through the REST API: a version's chunks, paginated, with page ranges, heading
paths and the OCR engine where OCR made the text; the verified extracted text of the published
version as a UTF-8 download, a 409 with its reason for any other version, 404 for another
tenant. Runs on both databases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from documents.models import Chunk
from jobs.models import Status
from tests.api.conftest import Caller, assert_error, drive
from tests.documents import files

pytestmark = pytest.mark.django_db(transaction=True)  # runs jobs: workers commit


@pytest.fixture(autouse=True)
def media(settings: Any, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"


def post(caller: Caller, name: str, data: bytes, document: str = "") -> dict[str, Any]:
    url = f"/api/documents/{document}/versions/" if document else "/api/documents/"
    response = caller.client.post(url, {"file": SimpleUploadedFile(name, data)}, format="multipart")
    assert response.status_code == 201, response.content
    body: dict[str, Any] = response.json()
    return body


MARKDOWN = "\n\n".join(
    f"# Part {n}\n\n" + " ".join(f"Sentence {n}.{i} about the amber harbor falcons." for i in range(40))
    for n in range(6)
)


def test_chunks_are_paginated_in_order_with_pages_and_headings(alice: Caller):
    body = post(alice, "notes.md", MARKDOWN.encode())
    assert drive(body["job_id"]).status == Status.READY
    doc = body["document_id"]
    total = Chunk.objects.filter(version__document_id=doc).count()
    assert total > 3

    first = alice.client.get(f"/api/documents/{doc}/versions/1/chunks", {"page_size": 2})
    assert first.status_code == 200
    page = first.json()
    assert (page["count"], page["version"], page["published"]) == (total, 1, True)
    assert [c["ordinal"] for c in page["results"]] == [0, 1]
    assert page["results"][0]["heading_path"] == ["Part 0"]
    assert page["results"][0]["page_start"] == page["results"][0]["page_end"] == 1
    assert page["results"][0]["ocr_engine"] is None
    assert "amber harbor falcons" in page["results"][0]["text"]
    seen = []
    url: str | None = f"/api/documents/{doc}/versions/1/chunks/?page_size=2"
    while url:
        answer = alice.client.get(url).json()
        seen += [c["ordinal"] for c in answer["results"]]
        url = answer["next"]
    assert seen == list(range(total))


def test_a_scanned_page_names_its_ocr_engine(alice: Caller, settings: Any):
    body = post(alice, "scan.pdf", files.scanned_pdf())
    assert drive(body["job_id"]).status == Status.READY
    chunks = alice.client.get(f"/api/documents/{body['document_id']}/versions/1/chunks").json()["results"]
    assert chunks and all(c["ocr_engine"] in ("tesseract", "rapidocr") for c in chunks)


def test_text_download_is_the_published_versions_only(alice: Caller, mallory: Caller):
    body = post(
        alice, "harbor report.pdf", files.text_pdf(["First page: amber falcons.", "Second page: café crème."])
    )
    assert drive(body["job_id"]).status == Status.READY
    doc = body["document_id"]

    response = alice.client.get(f"/api/documents/{doc}/versions/1/text")

    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["Content-Disposition"].startswith("attachment;")
    assert "harbor report-v1.txt" in response["Content-Disposition"]
    text = response.content.decode("utf-8")
    assert "First page: amber falcons." in text and "café crème" in text
    assert text.count("\f") == 1  # two pages

    queued = post(alice, "v2.pdf", files.text_pdf(["A newer page."]), document=doc)
    assert queued["version"] == 2
    assert_error(alice.client.get(f"/api/documents/{doc}/versions/2/text"), 409, "version_not_published")
    unpublished = alice.client.get(f"/api/documents/{doc}/versions/2/chunks").json()
    assert unpublished["published"] is False
    drive(queued["job_id"])
    assert_error(alice.client.get(f"/api/documents/{doc}/versions/1/text"), 409, "version_superseded")
    assert "A newer page." in alice.client.get(f"/api/documents/{doc}/versions/2/text").content.decode()

    assert_error(alice.client.get(f"/api/documents/{doc}/versions/9/text"), 404, "not_found")
    assert_error(mallory.client.get(f"/api/documents/{doc}/versions/2/text"), 404, "not_found")
    assert_error(mallory.client.get(f"/api/documents/{doc}/versions/2/chunks"), 404, "not_found")
