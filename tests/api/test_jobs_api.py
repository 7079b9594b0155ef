"""A job through the REST API: its status JSON at every point, cancel and retry with their refusals.

Jobs are driven in this process through the engine's own services: ``run_job`` for a whole run,
``job_claim`` + ``run_stage`` to stop at an exact stage, the reaper for a lost worker.
"""

from __future__ import annotations

from typing import Any

import pytest

from documents.api.output import job_status_as_of
from documents.models import DocumentVersion
from jobs.executor import run_stage
from jobs.models import Job, JobEvent, Status
from jobs.services.worker import job_claim, job_report_progress
from tests.api.conftest import (
    ERROR_KEYS,
    STATUS_KEYS,
    TEXT,
    Caller,
    assert_error,
    claim_at,
    drive,
    lose_the_worker_until_failed,
)
from tests.documents.files import encrypted_pdf, scanned_pdf, text_pdf

pytestmark = pytest.mark.django_db(transaction=True)

STAGES = ["parsing", "ocr", "chunking", "embedding", "indexing"]


# --- the status JSON --------------------------------------------------------------------------------


def test_status_of_a_queued_job_has_exactly_the_documented_keys_and_no_progress_number(alice: Caller):
    body = alice.uploaded()

    status = alice.client.get(body["status_url"])

    assert status.status_code == 200
    data = status.json()
    assert set(data) == STATUS_KEYS
    assert data["job_id"] == body["job_id"]
    assert data["document_id"] == body["document_id"]
    assert data["version"] == 1
    assert (data["status"], data["stage"], data["state"]) == ("queued", "parsing", "queued")
    assert (data["stage_index"], data["stage_count"]) == (1, 5)
    assert data["progress"] is None  # no total is known: no number is shown
    assert data["processed"] is None
    assert data["total"] is None
    assert data["attempt"] == 0
    assert data["can_cancel"] is True
    assert data["can_retry"] is False
    assert data["cancel_requested"] is False
    assert data["error"] is None
    assert data["finished_at"] is None
    assert data["published_at"] is None
    assert data["updated_at"]
    assert [s["name"] for s in data["stages"]] == STAGES
    assert all(set(s) == {"name", "label", "state"} for s in data["stages"])
    assert data["status_url"] == body["status_url"]
    assert data["events_url"] == body["events_url"]


def test_progress_is_a_number_only_while_the_stage_reports_a_total(alice: Caller):
    body = alice.uploaded()
    claim = claim_at(body["job_id"], "parsing")

    running = alice.client.get(body["status_url"]).json()
    assert (running["status"], running["state"], running["stage_index"]) == ("running", "parsing", 1)
    assert running["attempt"] == 1
    assert running["progress"] is None
    assert running["can_cancel"] is True

    job_report_progress(job_id=body["job_id"], token=claim.token, done=1, total=4)
    counted = alice.client.get(body["status_url"]).json()
    assert (counted["processed"], counted["total"]) == (1, 4)
    assert counted["progress"] == pytest.approx(5.0)  # a quarter of parsing's weight of 20 (of 100)


def test_a_shown_progress_number_never_turns_null_or_drops_through_a_real_run(alice: Caller, settings):
    settings.JOBS_PROGRESS_WRITE_SECONDS = 0
    settings.JOBS_PROGRESS_EVENT_SECONDS = 0  # every report is an event: the finest sequence there is
    body = alice.uploaded(text_pdf(), "report.pdf")
    claim = job_claim(job_id=body["job_id"], worker="test-worker")
    polled = []
    while claim is not None:  # the status a poller reads between stages
        polled.append(alice.client.get(body["status_url"]).json()["progress"])
        claim = run_stage(claim)
    polled.append(alice.client.get(body["status_url"]).json()["progress"])
    job = Job.objects.get(pk=body["job_id"])
    version = DocumentVersion.objects.get(job_id=job.pk)
    # The data of every event as the event stream sends it, replayed from the log.
    streamed = [
        job_status_as_of(version, job, event)["progress"]
        for event in JobEvent.objects.filter(job=job).order_by("id")
    ]

    for sequence in (polled, streamed):
        assert sequence[-1] == 100.0, sequence
        numbers = sequence[sequence.index(next(p for p in sequence if p is not None)) :]
        assert None not in numbers, sequence
        assert numbers == sorted(numbers), sequence
        assert 100.0 not in numbers[:-1], sequence
    assert len(set(streamed)) > 3  # parsing's pages, chunking and the rest were all counted


def test_status_at_a_later_stage_counts_the_stages_before_it(alice: Caller):
    body = alice.uploaded()
    claim_at(body["job_id"], "embedding")

    data = alice.client.get(body["status_url"]).json()

    assert (data["status"], data["stage"], data["state"]) == ("running", "embedding", "embedding")
    assert (data["stage_index"], data["stage_count"]) == (4, 5)
    assert [s["state"] for s in data["stages"]] == ["done", "skipped", "done", "running", "waiting"]
    # Embedding has not reported a total yet: the stages before it (20 + 25 skipped + 15) stay.
    assert data["progress"] == 60.0


def test_status_of_a_ready_job(alice: Caller):
    body = alice.uploaded()
    assert drive(body["job_id"]).status == Status.READY

    data = alice.client.get(body["status_url"]).json()

    assert set(data) == STATUS_KEYS
    assert (data["status"], data["state"]) == ("ready", "ready")
    assert data["progress"] == 100.0
    assert data["can_cancel"] is False
    assert data["can_retry"] is False
    assert data["finished_at"] is not None
    assert data["published_at"] is not None
    assert data["error"] is None
    assert [s["state"] for s in data["stages"]] == ["done", "skipped", "done", "done", "done"]


def test_status_of_a_job_failed_by_its_input_says_what_to_do(alice: Caller):
    body = alice.uploaded(encrypted_pdf(), "locked.pdf")
    assert drive(body["job_id"]).status == Status.FAILED

    data = alice.client.get(body["status_url"]).json()

    assert (data["status"], data["stage"], data["state"]) == ("failed", "parsing", "parse_failed")
    assert data["progress"] == 0.0  # how far it got (nothing), not null
    assert data["can_retry"] is False
    assert data["can_cancel"] is False
    assert set(data["error"]) == ERROR_KEYS
    assert data["error"]["code"] == "encrypted_input"
    assert data["error"]["retryable"] is False
    assert data["error"]["action"] == "reupload"
    assert "password" in data["error"]["message"]


@pytest.mark.parametrize(
    "path",
    [
        "/api/documents/{doc}/jobs/{other}",
        "/api/documents/{other}/jobs/{job}",
        "/api/documents/{doc}/jobs/not-a-uuid",
        "/api/documents/not-a-uuid/jobs/{job}",
        "/api/documents/{job}/jobs/{doc}",
    ],
    ids=["unknown-job", "unknown-document", "malformed-job", "malformed-document", "swapped"],
)
def test_status_with_unknown_or_mismatched_ids_is_404(alice: Caller, path: str):
    body = alice.uploaded()
    url = path.format(
        doc=body["document_id"], job=body["job_id"], other="5d1e4a80-1b49-4c6e-9d1a-6a2d4f0c9e11"
    )
    assert_error(alice.client.get(url), 404, "not_found")


def test_a_job_of_another_document_of_the_same_tenant_is_404(alice: Caller):
    first = alice.uploaded(TEXT, "a.txt")
    second = alice.uploaded(TEXT + b"b", "b.txt")
    url = f"/api/documents/{first['document_id']}/jobs/{second['job_id']}"
    assert_error(alice.client.get(url), 404, "not_found")
    assert_error(alice.client.post(f"{url}/cancel"), 404, "not_found")
    assert Job.objects.get(pk=second["job_id"]).status == Status.QUEUED


# --- cancel -----------------------------------------------------------------------------------------


def test_cancel_of_a_queued_job_is_immediate(alice: Caller):
    body = alice.uploaded()

    response = alice.client.post(f"{body['status_url']}/cancel")

    assert response.status_code == 202
    data = response.json()
    assert set(data) == STATUS_KEYS
    assert (data["status"], data["state"]) == ("cancelled", "cancelled")
    assert data["can_cancel"] is False
    assert data["can_retry"] is False
    assert Job.objects.get(pk=body["job_id"]).status == Status.CANCELLED
    assert alice.client.get(body["status_url"]).json()["state"] == "cancelled"
    event = JobEvent.objects.filter(job_id=body["job_id"]).latest("id")
    assert (event.name, event.actor, event.actor_name) == ("cancel", "user", "alice")


def test_cancel_of_a_running_job_is_requested_and_honoured_by_the_worker(alice: Caller):
    body = alice.uploaded()
    claim = claim_at(body["job_id"], "chunking")

    response = alice.client.post(f"{body['status_url']}/cancel")

    assert response.status_code == 202
    data = response.json()
    assert (data["status"], data["state"]) == ("cancel_requested", "cancel_requested")
    assert data["cancel_requested"] is True
    assert data["can_cancel"] is False
    assert data["stage"] == "chunking"

    assert run_stage(claim) is None  # the worker stops at its next safe point
    final = alice.client.get(body["status_url"]).json()
    assert (final["status"], final["state"]) == ("cancelled", "cancelled")
    assert final["published_at"] is None


def test_second_cancel_is_409_already_requested(alice: Caller):
    body = alice.uploaded()
    claim_at(body["job_id"], "parsing")
    assert alice.client.post(f"{body['status_url']}/cancel").status_code == 202
    version = Job.objects.get(pk=body["job_id"]).version

    error = assert_error(alice.client.post(f"{body['status_url']}/cancel"), 409, "not_allowed")

    assert "already requested" in error["message"]
    assert Job.objects.get(pk=body["job_id"]).version == version


@pytest.mark.parametrize("finish", ["ready", "failed", "cancelled"])
def test_cancel_of_a_finished_job_is_409_with_the_reason(alice: Caller, finish: str):
    data = encrypted_pdf() if finish == "failed" else TEXT
    body = alice.uploaded(data, "f.pdf" if finish == "failed" else "f.txt")
    if finish == "cancelled":
        alice.client.post(f"{body['status_url']}/cancel")
    else:
        drive(body["job_id"])
    job = Job.objects.get(pk=body["job_id"])
    assert job.status == finish

    error = assert_error(alice.client.post(f"{body['status_url']}/cancel"), 409, "not_allowed")

    assert "already finished" in error["message"]
    assert Job.objects.get(pk=body["job_id"]).version == job.version


def test_cancel_of_an_unknown_job_is_404(alice: Caller):
    body = alice.uploaded()
    url = f"/api/documents/{body['document_id']}/jobs/0c1d2e3f-4a5b-4c6d-8e7f-8091a2b3c4d5/cancel"
    assert_error(alice.client.post(url), 404, "not_found")


# --- retry ------------------------------------------------------------------------------------------


def test_retry_of_a_failure_the_user_may_retry_requeues_it_and_it_can_finish(alice: Caller):
    body = alice.uploaded()
    failed = lose_the_worker_until_failed(body["job_id"])
    assert (failed.error_code, failed.stage) == ("worker_lost", "parsing")
    before = alice.client.get(body["status_url"]).json()
    assert before["state"] == "parse_failed"
    assert before["can_retry"] is True
    assert before["error"]["retryable"] is True
    assert before["error"]["code"] == "worker_lost"

    response = alice.client.post(f"{body['status_url']}/retry")

    assert response.status_code == 202
    data = response.json()
    assert set(data) == STATUS_KEYS
    assert (data["status"], data["stage"], data["state"]) == ("queued", "parsing", "queued")
    assert data["error"] is None
    assert data["can_retry"] is False
    assert data["can_cancel"] is True
    event = JobEvent.objects.filter(job_id=body["job_id"]).latest("id")
    assert (event.name, event.actor, event.actor_name) == ("retry", "user", "alice")

    assert drive(body["job_id"]).status == Status.READY
    assert alice.client.get(body["status_url"]).json()["state"] == "ready"


def test_retry_of_a_failure_the_user_cannot_fix_by_retrying_is_409(alice: Caller):
    body = alice.uploaded(encrypted_pdf(), "locked.pdf")
    job = drive(body["job_id"])
    assert (job.status, job.error_code) == (Status.FAILED, "encrypted_input")

    error = assert_error(alice.client.post(f"{body['status_url']}/retry"), 409, "not_allowed")

    assert "cannot be fixed by retrying" in error["message"]
    assert "password" in error["message"]
    after = Job.objects.get(pk=body["job_id"])
    assert (after.status, after.version) == (Status.FAILED, job.version)


@pytest.mark.parametrize("state", ["queued", "running", "ready"])
def test_retry_of_a_job_that_has_not_failed_is_409(alice: Caller, state: str):
    body = alice.uploaded()
    if state == "running":
        claim_at(body["job_id"], "parsing")
    elif state == "ready":
        drive(body["job_id"])

    error = assert_error(alice.client.post(f"{body['status_url']}/retry"), 409, "not_allowed")

    assert "Only a failed job can be retried" in error["message"]


def test_a_refusal_names_the_state_with_the_words_the_pages_use(alice: Caller):
    body = alice.uploaded(scanned_pdf(), "scan.pdf")
    claim_at(body["job_id"], "ocr")

    during_ocr = assert_error(alice.client.post(f"{body['status_url']}/retry"), 409, "not_allowed")
    assert during_ocr["message"] == "Only a failed job can be retried; this one is “Recognising text”."

    assert alice.client.post(f"{body['status_url']}/cancel").status_code == 202
    stopping = assert_error(alice.client.post(f"{body['status_url']}/retry"), 409, "not_allowed")
    assert stopping["message"] == "Only a failed job can be retried; this one is “Stopping…”."


def test_retry_of_an_unknown_job_is_404(alice: Caller):
    body = alice.uploaded()
    url = f"/api/documents/{body['document_id']}/jobs/0c1d2e3f-4a5b-4c6d-8e7f-8091a2b3c4d5/retry"
    assert_error(alice.client.post(url), 404, "not_found")


def test_the_status_endpoint_answers_in_two_queries(alice: Caller, django_assert_num_queries: Any):
    # Token, user and workspace in one query; the version with its job in the other. Clients
    # poll this endpoint: each query more is a share of its throughput.
    body = alice.uploaded()
    with django_assert_num_queries(2) as captured:
        response = alice.client.get(body["status_url"])
    assert response.status_code == 200
    assert response.json()["job_id"] == body["job_id"]
    # The version is found by its unique job: sorting it (the model's default order) is waste.
    version_query = captured.captured_queries[1]["sql"]
    assert "documents_documentversion" in version_query and "ORDER BY" not in version_query
