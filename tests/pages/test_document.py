"""A document's page: stepper, progress, actions, failure, readiness, versions (test client)."""

from __future__ import annotations

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from jobs.models import Status
from jobs.services.lifecycle import job_cancel
from tests.documents.files import PAGE_PHRASES, encrypted_pdf, text_pdf
from tests.pages.helpers import (
    Member,
    detail_url,
    failed_retryable,
    failed_reupload,
    html,
    job,
    job_id_of,
    job_url,
    queued,
    ready,
    running,
)

pytestmark = pytest.mark.django_db(transaction=True)
REFRESH = '<noscript><meta http-equiv="refresh" content="5"></noscript>'


def steps(body: str) -> dict[str, str]:
    return dict(re.findall(r'<li class="step" data-stage="(\w+)" data-state="(\w+)"', body))


def hidden(body: str, marker: str) -> bool:
    """Whether the element carrying ``marker`` (e.g. ``data-action="cancel"``) is hidden."""
    tag = re.search(rf"<[^>]*{re.escape(marker)}[^>]*>", body, re.DOTALL)
    assert tag is not None, marker
    return " hidden" in tag.group(0)


def test_a_running_job_shows_stepper_progress_counts_attempt_time_and_cancel(alice: Member):
    result, _claim = running(alice, done=130, total=200)
    response = alice.client.get(detail_url(result))
    assert response.status_code == 200
    body = html(response)
    assert steps(body) == {
        "parsing": "running",
        "ocr": "waiting",
        "chunking": "waiting",
        "embedding": "waiting",
        "indexing": "waiting",
    }
    assert 'data-state="running" aria-current="step"' in body
    assert '<span class="badge state-parsing" data-field="state">Parsing</span>' in body
    assert "Stage 1 of 5 · Parsing" in body
    assert '<progress id="job-progress" max="100" value="13"' in body
    assert "130 of 200 pages" in body
    assert '<dd data-field="attempt">1</dd>' in body
    assert '<dd data-field="updated"><time datetime="' in body
    assert not hidden(body, 'data-action="cancel"')
    assert hidden(body, 'data-action="retry"')
    assert hidden(body, 'data-field="stopping"')
    assert hidden(body, 'data-field="error"')
    cancel = re.search(
        r'<form method="post" action="([^"]+)" data-action="cancel".*?</form>', body, re.DOTALL
    )
    assert cancel is not None
    assert cancel.group(1) == job_url(result, "cancel")
    assert 'name="csrfmiddlewaretoken"' in cancel.group(0)


def test_without_a_real_total_there_is_no_bar_but_the_stage_and_time(alice: Member):
    result, _claim = running(alice, total=None)
    body = html(alice.client.get(detail_url(result)))
    assert hidden(body, 'data-field="progress"')
    assert "Stage 1 of 5 · Parsing" in body
    assert '<dd data-field="updated"><time' in body


def test_the_page_carries_the_status_json_and_the_live_script(alice: Member):
    result, _claim = running(alice)
    body = html(alice.client.get(detail_url(result)))
    embedded = re.search(r'<script id="job-status" type="application/json">(.*?)</script>', body)
    assert embedded is not None
    status = json.loads(embedded.group(1))
    assert status["job_id"] == str(job_id_of(result))
    assert status["events_url"].endswith("/events")
    assert '<script id="status-words" type="application/json">' in body
    assert "documents/live.js" in body


def test_cancel_asks_the_worker_to_stop_and_the_page_says_stopping(alice: Member):
    result, _claim = running(alice)
    response = alice.client.post(job_url(result, "cancel"), {"confirm": "yes"})
    assert response.status_code == 303
    assert response["Location"] == detail_url(result)
    assert job(result).status == Status.CANCEL_REQUESTED
    body = html(alice.client.get(detail_url(result)))
    assert "Cancellation requested" in body
    assert "Stopping…" in body
    assert not hidden(body, 'data-field="stopping"')
    assert hidden(body, 'data-action="cancel"')


def test_cancelling_a_queued_job_cancels_it_at_once(alice: Member):
    result = queued(alice)
    alice.client.post(job_url(result, "cancel"), {"confirm": "yes"})
    assert job(result).status == Status.CANCELLED
    body = html(alice.client.get(detail_url(result)))
    assert '<span class="badge state-cancelled" data-field="state">Cancelled</span>' in body
    assert steps(body)["parsing"] == "cancelled"


def test_a_refused_cancel_is_explained_not_an_error_page(alice: Member):
    result = ready(alice)
    response = alice.client.post(job_url(result, "cancel"), {"confirm": "yes"}, follow=True)
    assert response.status_code == 200
    assert "can no longer be cancelled" in html(response)
    assert job(result).status == Status.READY


def test_retry_queues_a_failed_job_again_where_the_cause_allows(alice: Member):
    result = failed_retryable(alice)
    body = html(alice.client.get(detail_url(result)))
    assert not hidden(body, 'data-action="retry"')
    assert "The worker processing this job stopped responding." in body
    assert "Contact your operator" in body
    response = alice.client.post(job_url(result, "retry"))
    assert response.status_code == 303
    assert job(result).status == Status.QUEUED
    assert "Processing was queued again." in html(alice.client.get(detail_url(result)))


def test_a_failure_shows_the_safe_message_the_action_and_a_reupload_form(alice: Member):
    result = failed_reupload(alice)
    body = html(alice.client.get(detail_url(result)))
    assert '<span class="badge state-parse_failed" data-field="state">Parsing failed</span>' in body
    assert steps(body)["parsing"] == "failed"
    assert "The file is password-protected. Remove the password and upload it again." in body
    assert "Upload a corrected copy of the file." in body
    assert not hidden(body, 'data-field="reupload"')
    assert 'id="reupload_file"' in body
    # One upload form is offered, not two: the page's own section steps aside.
    assert hidden(body, 'data-field="new-version"')
    assert hidden(body, 'data-action="retry"')
    for internal in ("Traceback", "pdfium", "PdfiumError", ".py", "encrypted_input"):
        assert internal not in body.split('<script id="job-status"')[0]


def test_a_reupload_through_the_failure_form_makes_version_two(alice: Member):
    result = failed_reupload(alice)
    upload = SimpleUploadedFile("fixed.pdf", text_pdf(), content_type="application/pdf")
    response = alice.client.post(f"/documents/{result.document.pk}/versions", {"file": upload})
    assert response.status_code == 303
    body = html(alice.client.get(detail_url(result)))
    assert '<h2 id="status-heading">Version 2</h2>' in body
    assert '<td data-label="File" class="filename">fixed.pdf</td>' in body


def test_a_refused_version_upload_rerenders_the_page_with_its_status(alice: Member):
    result = ready(alice)
    upload = SimpleUploadedFile("notes.bin", b"\x00\x01\x02 binary", content_type="application/pdf")
    response = alice.client.post(f"/documents/{result.document.pk}/versions", {"file": upload})
    assert response.status_code == 415
    assert "This file type is not supported." in html(response)
    assert 'id="id_file_error"' in html(response)


def test_a_ready_document_says_since_when_it_is_searchable_and_offers_search(alice: Member):
    result = ready(alice)
    body = html(alice.client.get(detail_url(result)))
    assert '<span class="badge state-ready" data-field="state">Ready</span>' in body
    assert set(steps(body).values()) <= {"done", "skipped"}
    assert steps(body)["ocr"] == "skipped"  # a text PDF needs no OCR
    assert re.search(
        r"Searchable since <time datetime=\"[^\"]+\" data-local>[^<]+</time> \(version 1\)", body
    )
    assert not hidden(body, 'data-field="searchable"')
    assert '<form class="search-inline" action="/search" method="get" role="search">' in body
    assert '<progress id="job-progress" max="100" value="100"' in body
    assert hidden(body, 'data-action="cancel"')


def test_the_version_table_tells_published_superseded_failed_and_processing_apart(alice: Member):
    first = ready(alice)
    alice.upload_version(first, text_pdf([*PAGE_PHRASES, "A second edition."]), run=True)
    alice.upload_version(first, b"Plain notes, third edition.", name="third.txt", run=False)
    alice.upload_version(first, text_pdf(["A fourth edition."]), run=False)
    body = html(alice.client.get(detail_url(first)))
    roles = re.findall(
        r'<th scope="row" data-label="Version">(\d+)</th>.*?data-role="(\w+)"', body, re.DOTALL
    )
    assert roles == [("4", "processing"), ("3", "processing"), ("2", "published"), ("1", "superseded")]


def test_the_version_table_marks_a_failed_version(alice: Member):
    first = ready(alice)
    alice.upload_version(first, encrypted_pdf(), name="locked.pdf", run=True)
    body = html(alice.client.get(detail_url(first)))
    roles = re.findall(
        r'<th scope="row" data-label="Version">(\d+)</th>.*?data-role="(\w+)"', body, re.DOTALL
    )
    assert roles == [("2", "failed"), ("1", "published")]
    # The failure of version 2 does not hide that version 1 is still searchable.
    assert "(version 1)" in body


@pytest.mark.parametrize(
    ("make", "refreshes"),
    [
        (lambda m: queued(m), True),
        (lambda m: running(m)[0], True),
        (lambda m: ready(m), False),
        (lambda m: failed_reupload(m), False),
    ],
    ids=["queued", "running", "ready", "failed"],
)
def test_without_javascript_the_page_refreshes_itself_only_while_the_job_is_active(
    alice: Member, make, refreshes
):
    result = make(alice)
    body = html(alice.client.get(detail_url(result)))
    assert (REFRESH in body) is refreshes
    if refreshes:
        assert body.index(REFRESH) < body.index("</head>")


def test_a_cancelled_job_stops_refreshing(alice: Member):
    result = queued(alice)
    job_cancel(job_id=job_id_of(result))
    assert REFRESH not in html(alice.client.get(detail_url(result)))


def test_every_form_on_the_page_carries_a_csrf_token(alice: Member):
    result, _claim = running(alice)
    body = html(alice.client.get(detail_url(result)))
    posts = re.findall(r'<form method="post".*?</form>', body, re.DOTALL)
    posts += re.findall(r'<form class="(?:language|logout)"[^>]*method="post".*?</form>', body, re.DOTALL)
    assert len(posts) >= 6  # cancel, retry, two uploads, language, log out
    for form in posts:
        assert 'name="csrfmiddlewaretoken"' in form


def test_a_post_without_the_csrf_token_is_refused(alice: Member):
    result, _claim = running(alice)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice.user)
    assert strict.post(job_url(result, "cancel")).status_code == 403
    assert job(result).status == Status.RUNNING
