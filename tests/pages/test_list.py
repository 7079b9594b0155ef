"""The documents list and its upload form, through Django's test client."""

from __future__ import annotations

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext

from documents import parsers
from documents.models import Document
from tests.documents import csv_parser
from tests.documents.files import docx_bomb, text_pdf, zip_of_other_files
from tests.pages.helpers import PASSWORD, Member, html, queued, ready, running

pytestmark = pytest.mark.django_db(transaction=True)


def test_login_is_required_and_leads_back_to_the_list(alice: Member, client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/"

    page = client.get("/accounts/login/?next=/")
    assert page.status_code == 200
    assert 'name="csrfmiddlewaretoken"' in html(page)
    assert '<label for="id_username">Username</label>' in html(page)

    logged_in = client.post("/accounts/login/", {"username": "alice", "password": PASSWORD, "next": "/"})
    assert logged_in.status_code == 302
    assert logged_in["Location"] == "/"
    assert client.get("/").status_code == 200


def test_a_user_without_a_workspace_is_told_so_with_403(transactional_db, client, django_user_model):
    user = django_user_model.objects.create_user(username="loner", password="pw")
    client.force_login(user)
    response = client.get("/")
    assert response.status_code == 403
    assert "does not belong to a workspace" in html(response)


def test_the_list_shows_the_tenants_documents_only(alice: Member, bob: Member):
    mine = queued(alice, title="Alice quarterly")
    theirs = queued(bob, title="Bob secret plans")
    body = html(alice.client.get("/"))
    assert "Alice quarterly" in body
    assert f'href="/documents/{mine.document.pk}/"' in body
    assert "Bob secret plans" not in body
    assert str(theirs.document.pk) not in body


def test_each_row_has_state_stage_update_time_and_published_version(alice: Member):
    waiting = queued(alice, title="Waiting doc")
    done = ready(alice, title="Done doc")
    body = html(alice.client.get("/"))
    row_waiting = _row(body, waiting.document.pk)
    assert '<span class="badge state-queued">Queued</span>' in row_waiting
    assert "Stage 1 of 5 · Parsing" in row_waiting
    assert "<time datetime=" in row_waiting
    assert "Not yet" in row_waiting
    row_done = _row(body, done.document.pk)
    assert "Ready" in row_done
    assert "Version 1" in row_done
    assert "All stages done" in row_done
    # What the page's script reads to know whether to keep following the list.
    assert row_waiting.startswith('<tr data-status="queued">')
    assert row_done.startswith('<tr data-status="ready">')


def test_a_progress_bar_appears_only_where_the_status_has_an_honest_number(alice: Member):
    no_total = queued(alice, title="No total yet")
    counted, _claim = running(alice, done=130, total=200)
    body = html(alice.client.get("/"))
    assert "<progress" not in _row(body, no_total.document.pk)
    row = _row(body, counted.document.pk)
    assert '<progress max="100" value="13"' in row
    assert "13%" in row


def test_the_list_costs_the_same_queries_for_three_documents_or_six(alice: Member):
    for _ in range(3):
        queued(alice)
    with CaptureQueriesContext(connection) as three:
        assert alice.client.get("/").status_code == 200
    for _ in range(3):
        running(alice)
    with CaptureQueriesContext(connection) as six:
        assert alice.client.get("/").status_code == 200
    assert len(six) == len(three)


def test_uploading_a_document_creates_it_and_shows_its_page(alice: Member):
    pdf = ("report.pdf", text_pdf(), "application/pdf")
    response = alice.client.post("/", {"file": _file(*pdf), "title": "Annual report"})
    assert response.status_code == 303
    document = Document.objects.get(tenant=alice.tenant)
    assert document.title == "Annual report"
    assert response["Location"] == f"/documents/{document.pk}/"
    page = alice.client.get(response["Location"])
    assert "Annual report" in html(page)
    assert "Queued" in html(page)


@pytest.mark.parametrize(
    ("name", "data", "status", "message"),
    [
        ("empty.pdf", b"", 400, "The file is empty."),
        ("archive.docx", zip_of_other_files(), 415, "This file type is not supported."),
        # built when its test runs, not at collection
        ("bomb.docx", lambda: docx_bomb(50), 400, "expands to more data than can be opened safely"),
        ("big.pdf", text_pdf() * 2, 413, "The file is larger than the limit of"),
    ],
)
def test_a_refused_upload_shows_the_reason_next_to_the_file_field_with_its_status(
    alice: Member, settings, name, data, status, message
):
    if name == "big.pdf":
        settings.DOCUMENTS_MAX_UPLOAD_BYTES = len(text_pdf()) + 10
    if callable(data):
        data = data()
    response = alice.client.post("/", {"file": _file(name, data), "title": "Kept title"})
    assert response.status_code == status
    body = html(response)
    # The message sits in the file field's own block, tied to the input for screen readers.
    field = re.search(r'<div class="field has-error">.*?</div>', body, re.DOTALL)
    assert field is not None
    assert 'id="id_file"' in field.group(0)
    assert 'aria-invalid="true"' in field.group(0)
    assert 'id="id_file_error" role="alert"' in field.group(0)
    assert message in field.group(0)
    assert 'value="Kept title"' in body
    assert not Document.objects.exists()


def test_the_upload_form_and_its_refusal_name_the_registered_kinds_in_the_readers_language(alice: Member):
    built_in = parsers.labels()
    with_csv = sorted([*built_in, "CSV"], key=str.casefold)
    junk = _file("blob.bin", b"\x00\x01\x02 binary" * 20)
    with csv_parser.registered():
        form = html(alice.client.get("/"))
        refused = alice.client.post("/", {"file": junk}, headers={"Accept-Language": "zh-hans"})
    assert f"{', '.join(with_csv)}, up to" in form
    assert refused.status_code == 415
    chinese = "、".join("纯文本" if label == "plain text" else label for label in with_csv)
    assert f"{chinese}。" in html(refused)
    after = html(alice.client.get("/"))
    assert f"{', '.join(built_in)}, up to" in after and "CSV" not in after


def test_posting_without_a_file_is_a_400_with_the_field_marked(alice: Member):
    response = alice.client.post("/", {"title": "Nothing attached"})
    assert response.status_code == 400
    assert "This field is required." in html(response)


def _file(name: str, data: bytes, content_type: str = "application/octet-stream"):
    return SimpleUploadedFile(name, data, content_type=content_type)


def _row(body: str, document_id: object) -> str:
    pattern = rf'<tr[^>]*>\s*<th scope="row"[^>]*>\s*<a href="/documents/{document_id}/".*?</tr>'
    match = re.search(pattern, body, re.DOTALL)
    assert match is not None, f"no row for {document_id}"
    return match.group(0)
