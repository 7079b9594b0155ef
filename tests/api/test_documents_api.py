"""Documents through the REST API: upload, new versions, duplicates, list, detail, search, and
every way an upload is refused (nothing is stored for a refused upload)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from documents import parsers
from documents.models import Document, DocumentVersion
from jobs.models import Job, Status
from tests.api.conftest import STATUS_KEYS, TEXT, UPLOAD_KEYS, Caller, assert_error, drive
from tests.documents import csv_parser
from tests.documents.files import docx_bomb, docx_document, encrypted_pdf, text_pdf, zip_of_other_files

pytestmark = pytest.mark.django_db


@pytest.fixture
def media(settings: Any, tmp_path: Path) -> Path:
    """A media folder of this test's own (the shared one may be written by other test runs)."""
    settings.MEDIA_ROOT = tmp_path / "media"
    return Path(settings.MEDIA_ROOT)


def stored(media: Path) -> list[Path]:
    return sorted(path for path in media.rglob("*") if path.is_file())


# --- upload ---------------------------------------------------------------------------------------


def test_upload_answers_201_with_ids_and_links_of_a_queued_job(alice: Caller):
    response = alice.upload(TEXT, "harbor notes.txt", title="Harbor notes")

    assert response.status_code == 201
    body = response.json()
    assert set(body) == UPLOAD_KEYS
    assert body["version"] == 1
    assert body["duplicate"] is False
    base = f"/api/documents/{body['document_id']}/jobs/{body['job_id']}"
    assert body["status_url"] == base
    assert body["events_url"] == f"{base}/events"
    version = DocumentVersion.objects.select_related("document", "job").get(job_id=body["job_id"])
    assert str(version.document_id) == body["document_id"]
    assert version.document.title == "Harbor notes"
    assert version.document.tenant.slug == "acme"
    assert version.job is not None
    assert version.job.status == Status.QUEUED

    status = alice.client.get(body["status_url"])
    assert status.status_code == 200
    assert status.json()["state"] == "queued"


def test_upload_without_a_title_takes_the_file_name(alice: Caller):
    body = alice.uploaded(TEXT, "minutes.txt")
    assert alice.client.get(f"/api/documents/{body['document_id']}/").json()["title"] == "minutes.txt"


def test_upload_of_real_pdf_and_docx_files_is_accepted(alice: Caller):
    for data, name in ((text_pdf(), "report.pdf"), (docx_document(), "report.docx")):
        assert alice.upload(data, name).status_code == 201


def test_upload_without_a_file_is_400(alice: Caller):
    response = alice.client.post("/api/documents/", {"title": "no file"}, format="multipart")
    error = assert_error(response, 400, "invalid")
    assert "file" in error["detail"]
    assert not Document.objects.exists()


@pytest.mark.parametrize(
    ("data", "name", "status", "code"),
    [
        (b"", "empty.txt", 400, "file_empty"),
        (zip_of_other_files(), "archive.zip", 415, "unsupported_type"),
        (b"\x00\x01\x02\x03binary garbage\xff\xfe" * 10, "blob.bin", 415, "unsupported_type"),
        (docx_bomb, "bomb.docx", 400, "docx_bomb"),  # built when its test runs, not at collection
    ],
    ids=["empty", "zip", "binary", "docx-bomb"],
)
def test_refused_uploads_answer_their_code_and_store_nothing(
    alice: Caller, media: Path, data: bytes | Callable[[], bytes], name: str, status: int, code: str
):
    response = alice.upload(data if isinstance(data, bytes) else data(), name)
    assert_error(response, status, code)
    assert not Document.objects.exists()
    assert not Job.objects.exists()
    assert stored(media) == []
    assert alice.upload(TEXT, "accepted.txt").status_code == 201
    assert len(stored(media)) == 1  # an accepted upload is stored there


def test_an_unsupported_type_is_refused_naming_the_registered_parsers_kinds_in_the_readers_language(
    alice: Caller,
):
    junk = b"\x00\x01\x02\x03binary garbage\xff\xfe" * 10
    built_in = parsers.labels()
    assert {"PDF", "DOCX", "plain text", "PNG"} <= set(built_in) and "CSV" not in built_in
    with csv_parser.registered():
        english = assert_error(alice.upload(junk, "blob.bin"), 415, "unsupported_type")["message"]
        chinese_answer = alice.client.post(
            "/api/documents/",
            {"file": SimpleUploadedFile("blob.bin", junk)},
            format="multipart",
            HTTP_ACCEPT_LANGUAGE="zh-hans",
        )
        chinese = assert_error(chinese_answer, 415, "unsupported_type")["message"]
    without = assert_error(alice.upload(junk, "blob.bin"), 415, "unsupported_type")["message"]

    said = "This file type is not supported. Upload one of these types: {}."
    assert english == said.format(", ".join(sorted([*built_in, "CSV"], key=str.casefold)))
    lead = "不支持此文件类型。请上传以下类型之一："  # noqa: RUF001 (Chinese punctuation)
    assert chinese.startswith(lead) and chinese.endswith("。"), chinese
    listed = chinese.removeprefix(lead).removesuffix("。").split("、")
    assert "CSV" in listed and "纯文本" in listed and "PDF" in listed and "plain text" not in listed
    assert len(listed) == len(built_in) + 1
    assert without == said.format(", ".join(built_in))
    assert not Document.objects.exists()


def test_upload_over_the_size_limit_is_413(alice: Caller, settings):
    settings.DOCUMENTS_MAX_UPLOAD_BYTES = 64
    assert alice.upload(b"x" * 64, "fits.txt").status_code == 201
    error = assert_error(alice.upload(b"y" * 65, "big.txt"), 413, "file_too_large")
    assert "64" in error["message"]
    assert Document.objects.count() == 1


def test_upload_as_json_is_415(alice: Caller):
    response = alice.client.post("/api/documents/", {"file": "aGVsbG8="}, format="json")
    assert_error(response, 415, "unsupported_media_type")


def test_upload_with_a_broken_multipart_body_is_400(alice: Caller):
    response = alice.client.post("/api/documents/", b"garbage", content_type="multipart/form-data")
    assert_error(response, 400, "bad_request")


# --- versions ---------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)  # runs jobs: workers commit and use threads
def test_a_new_version_gets_its_own_job(alice: Caller):
    first = alice.uploaded(TEXT)
    drive(first["job_id"])

    response = alice.upload(TEXT + b"A new paragraph.\n", "notes-v2.txt", document=first["document_id"])
    assert response.status_code == 201
    second = response.json()
    assert set(second) == UPLOAD_KEYS
    assert second["document_id"] == first["document_id"]
    assert second["version"] == 2
    assert second["duplicate"] is False
    assert second["job_id"] != first["job_id"]
    assert Job.objects.get(pk=second["job_id"]).status == Status.QUEUED


@pytest.mark.django_db(transaction=True)  # runs jobs: workers commit and use threads
def test_identical_bytes_to_the_published_version_answer_200_duplicate_without_a_job(alice: Caller):
    first = alice.uploaded(TEXT)
    drive(first["job_id"])
    jobs_before = Job.objects.count()

    response = alice.upload(TEXT, "renamed.txt", document=first["document_id"])

    assert response.status_code == 200
    body = response.json()
    assert set(body) == UPLOAD_KEYS
    assert body == {**first, "duplicate": True}
    assert Job.objects.count() == jobs_before
    assert DocumentVersion.objects.filter(document_id=first["document_id"]).count() == 1


def test_a_version_of_an_unknown_document_is_404(alice: Caller):
    response = alice.upload(TEXT, document="3f1c2b6e-0000-4000-8000-000000000000")
    assert_error(response, 404, "not_found")
    assert not Document.objects.exists()


def test_a_refused_version_leaves_the_document_as_it_was(alice: Caller):
    first = alice.uploaded(TEXT)
    assert_error(
        alice.upload(b"\x00\x01 not a document", "x.pdf", document=first["document_id"]),
        415,
        "unsupported_type",
    )
    assert DocumentVersion.objects.filter(document_id=first["document_id"]).count() == 1


# --- list and detail ----------------------------------------------------------------------------------


def test_list_is_paginated_newest_first(alice: Caller):
    ids = [alice.uploaded(TEXT + str(i).encode(), f"n{i}.txt")["document_id"] for i in range(3)]

    page1 = alice.client.get("/api/documents/", {"page_size": 2})
    assert page1.status_code == 200
    body = page1.json()
    assert set(body) == {"count", "next", "previous", "results", "storage"}
    assert body["count"] == 3
    assert body["previous"] is None
    assert [d["document_id"] for d in body["results"]] == ids[::-1][:2]
    assert body["next"] is not None
    page2 = alice.client.get(body["next"]).json()
    assert [d["document_id"] for d in page2["results"]] == ids[::-1][2:]
    assert page2["next"] is None
    document = body["results"][0]
    assert set(document) == {
        "document_id",
        "collection_id",
        "title",
        "attributes",
        "created_at",
        "last_activity_at",
        "published_version",
        "published_at",
        "latest_job",
    }
    assert set(document["latest_job"]) == STATUS_KEYS


def test_list_page_past_the_end_is_404_in_the_error_shape(alice: Caller):
    alice.uploaded()
    assert_error(alice.client.get("/api/documents/", {"page": 9}), 404, "not_found")


@pytest.mark.django_db(transaction=True)  # runs jobs: workers commit and use threads
def test_list_filters_by_the_latest_versions_state(alice: Caller):
    ready = alice.uploaded(TEXT, "ready.txt")
    drive(ready["job_id"])
    failed = alice.uploaded(encrypted_pdf(), "locked.pdf")
    drive(failed["job_id"])
    queued = alice.uploaded(TEXT + b"queued", "queued.txt")

    def ids(state: str) -> list[str]:
        response = alice.client.get("/api/documents/", {"state": state})
        assert response.status_code == 200
        return [d["document_id"] for d in response.json()["results"]]

    assert ids("ready") == [ready["document_id"]]
    assert ids("parse_failed") == [failed["document_id"]]
    assert ids("queued") == [queued["document_id"]]
    assert ids("cancelled") == []
    assert len(alice.client.get("/api/documents/").json()["results"]) == 3


def test_list_searches_titles_sorts_and_a_new_version_moves_a_document_up(alice: Caller):
    alpha = alice.uploaded(TEXT + b"a", "a.txt", title="Alpha notes")["document_id"]
    beta = alice.uploaded(TEXT + b"b", "b.txt", title="Beta notes")["document_id"]
    other = alice.uploaded(TEXT + b"c", "c.txt", title="Lighthouse")["document_id"]

    def ids(**params: str) -> list[str]:
        response = alice.client.get("/api/documents/", params)
        assert response.status_code == 200, response.content
        return [d["document_id"] for d in response.json()["results"]]

    assert ids() == [other, beta, alpha]
    assert alice.upload(TEXT + b"a2", "a2.txt", document=alpha).status_code == 201
    assert ids() == [alpha, other, beta]  # last activity first
    assert ids(ordering="-created") == [other, beta, alpha]
    assert ids(ordering="title") == [alpha, beta, other]
    assert ids(ordering="-title", q="NOTES") == [beta, alpha]
    listed = alice.client.get("/api/documents/", {"q": "light"}).json()["results"]
    assert [d["document_id"] for d in listed] == [other] and "last_activity_at" in listed[0]
    error = assert_error(alice.client.get("/api/documents/", {"ordering": "size"}), 400, "invalid")
    assert "ordering" in error["detail"]


def test_list_with_an_unknown_state_is_400(alice: Caller):
    error = assert_error(alice.client.get("/api/documents/", {"state": "bogus"}), 400, "invalid")
    assert "state" in error["detail"]


@pytest.mark.django_db(transaction=True)  # runs jobs: workers commit and use threads
def test_detail_shows_the_published_version_the_latest_job_and_every_version(alice: Caller):
    first = alice.uploaded(TEXT)
    drive(first["job_id"])
    second = alice.uploaded(TEXT + b"More.", "v2.txt", document=first["document_id"])

    response = alice.client.get(f"/api/documents/{first['document_id']}/")

    assert response.status_code == 200
    body = response.json()
    assert set(body) == {
        "document_id",
        "collection_id",
        "title",
        "attributes",
        "created_at",
        "last_activity_at",
        "published_version",
        "published_at",
        "latest_job",
        "versions",
    }
    assert body["document_id"] == first["document_id"]
    assert body["published_version"] == 1
    assert body["published_at"] is not None
    assert body["latest_job"]["job_id"] == second["job_id"]
    assert body["latest_job"]["state"] == "queued"
    assert [v["version"] for v in body["versions"]] == [2, 1]
    v2, v1 = body["versions"]
    assert set(v1) == {
        "version",
        "original_name",
        "content_type",
        "size",
        "sha256",
        "created_at",
        "published_at",
        "superseded_at",
        "job",
    }
    assert v1["job"]["state"] == "ready"
    assert v1["job"]["job_id"] == first["job_id"]
    assert v1["published_at"] == body["published_at"]
    assert v1["size"] == len(TEXT)
    assert v2["job"]["job_id"] == second["job_id"]
    assert v2["published_at"] is None
    assert v2["original_name"] == "v2.txt"


def test_detail_of_an_unknown_document_is_404(alice: Caller):
    assert_error(alice.client.get("/api/documents/0b8f3c8e-9d3a-4c55-9f65-2f0e0a4b5c6d/"), 404, "not_found")
    assert_error(alice.client.get("/api/documents/not-a-uuid/"), 404, "not_found")


# --- search ---------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)  # runs jobs: workers commit and use threads
def test_search_finds_published_content_only(alice: Caller):
    published = alice.uploaded(TEXT, "harbor.txt", title="Harbor")
    drive(published["job_id"])
    cliff = alice.uploaded(b"Amber falcons nest on the granite cliff.\n", "cliff.txt")  # queued: not yet

    response = alice.client.get("/api/search", {"q": "harbor tide", "k": "5"})

    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"query", "mode", "results"}
    assert body["query"] == "harbor tide"
    assert body["mode"] == "hybrid"
    assert body["results"]
    hit = body["results"][0]
    assert set(hit) == {
        "document_id",
        "document_title",
        "attributes",
        "version",
        "page_start",
        "page_end",
        "heading_path",
        "snippet",
        "highlight",
        "score",
        "components",
        "ordinal",
    }
    assert hit["document_id"] == published["document_id"]
    assert hit["document_title"] == "Harbor"
    assert hit["version"] == 1
    assert "harbor" in hit["snippet"].lower()

    def found(query: str) -> set[str]:
        return {h["document_id"] for h in alice.client.get("/api/search", {"q": query}).json()["results"]}

    assert cliff["document_id"] not in found("amber falcons granite cliff")
    drive(cliff["job_id"])
    assert cliff["document_id"] in found("amber falcons granite cliff")  # searchable once ready


@pytest.mark.django_db(transaction=True)  # runs jobs: workers commit and use threads
def test_search_k_bounds_the_number_of_results(alice: Caller):
    for i in range(3):
        drive(
            alice.uploaded(f"Harbor report number {i}. The harbor is calm.\n".encode(), f"h{i}.txt")["job_id"]
        )
    assert len(alice.client.get("/api/search", {"q": "harbor", "k": "2"}).json()["results"]) == 2
    assert len(alice.client.get("/api/search", {"q": "harbor"}).json()["results"]) == 3


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "q"),
        ({"q": ""}, "q"),
        ({"q": "harbor", "k": "ten"}, "k"),
        ({"q": "harbor", "k": 0}, "k"),
        ({"q": "harbor", "k": 51}, "k"),
        ({"q": "x" * 501}, "q"),
    ],
    ids=["no-q", "blank-q", "k-not-int", "k-zero", "k-too-big", "q-too-long"],
)
def test_search_with_bad_parameters_is_400(alice: Caller, params: dict[str, Any], field: str):
    error = assert_error(alice.client.get("/api/search", params), 400, "invalid")
    assert field in error["detail"]


def test_upload_file_field_must_be_a_file(alice: Caller):
    response = alice.client.post("/api/documents/", {"file": "just text"}, format="multipart")
    error = assert_error(response, 400, "invalid")
    assert "file" in error["detail"]
