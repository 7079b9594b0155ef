"""Batch upload: one document per file, per-file refusals that do not fail the others, counts
and states while the jobs run, cancel of the whole batch, ``batch.completed`` when the last job
finishes, and another tenant's batch is a 404."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django_q.conf import Conf
from rest_framework.test import APIClient

from documents.models import Batch, Document, Tenant, WebhookMessage
from documents.services.batches import Upload, batch_create
from jobs.models import Job, JobEvent, Status
from tests.documents import files
from tests.documents.helpers import files_under, run_until_idle
from tests.documents.test_delete import client_for
from tests.documents.test_webhooks import register
from tests.documents.webhook_receiver import receiver

pytestmark = pytest.mark.django_db(transaction=True)

NOT_A_DOCUMENT = b"MZ\x90\x00\x03" + bytes(200)


@pytest.fixture(autouse=True)
def engine_settings(settings, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.WEBHOOK_ALLOW_PRIVATE = True


@pytest.fixture
def alice() -> APIClient:
    return client_for("alice", "acme")


@pytest.fixture
def mallory() -> APIClient:
    return client_for("mallory", "globex")


def post_batch(client: APIClient, named: list[tuple[str, bytes]]) -> Any:
    return client.post(
        "/api/batches",
        {"files": [SimpleUploadedFile(name, data) for name, data in named]},
        format="multipart",
    )


def counts(body: dict[str, Any]) -> dict[str, int]:
    return {k: v for k, v in body["file_counts"].items() if v}


def test_each_file_becomes_a_document_and_a_refused_one_fails_alone(alice, settings):
    response = post_batch(
        alice,
        [
            ("one.pdf", files.text_pdf(["Birch canoe on the lake."])),
            ("tool.exe", NOT_A_DOCUMENT),
            ("two.pdf", files.text_pdf(["Pewter kettle on the stove."])),
        ],
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert counts(body) == {"queued": 2, "total": 2, "rejected": 1}
    first, refused, second = body["documents"]
    assert (first["filename"], first["state"]) == ("one.pdf", "queued")
    assert refused["filename"] == "tool.exe" and refused["error"]["code"] == "unsupported_type"
    assert "document_id" not in refused
    listed = {d["document_id"] for d in alice.get("/api/documents/").json()["results"]}
    assert listed == {first["document_id"], second["document_id"]}
    assert len(files_under(Path(settings.MEDIA_ROOT))) == 2  # nothing stored for the refused one

    for item in (first, second):
        run_until_idle(item["job_id"])
    after = alice.get(f"/api/batches/{body['batch_id']}").json()
    assert counts(after) == {"ready": 2, "total": 2, "rejected": 1}
    assert [d.get("state") for d in after["documents"]] == ["ready", None, "ready"]
    assert after["completed_at"] is not None


def test_the_last_finished_job_sends_batch_completed_once(alice):
    with receiver() as hooks:
        register(alice, hooks.url, ["batch.completed"])
        body = post_batch(
            alice, [("a.pdf", files.text_pdf(["Lilac gate."])), ("b.pdf", files.text_pdf(["Rust anchor."]))]
        ).json()
        first, second = body["documents"]
        run_until_idle(first["job_id"])
        assert not WebhookMessage.objects.exists()  # one job still open
        run_until_idle(second["job_id"])

    [message] = WebhookMessage.objects.all()
    assert message.event_type == "batch.completed"
    assert message.payload["data"] == {
        "batch_id": body["batch_id"],
        "file_counts": {
            "queued": 0,
            "in_progress": 0,
            "ready": 2,
            "failed": 0,
            "cancelled": 0,
            "total": 2,
            "rejected": 0,
        },
    }


def test_cancelling_a_batch_cancels_its_unfinished_jobs(alice):
    body = post_batch(
        alice,
        [("a.pdf", files.text_pdf(["Navy lantern."])), ("b.pdf", files.text_pdf(["Ivory tower."]))],
    ).json()
    done, waiting = body["documents"]
    run_until_idle(done["job_id"])

    response = alice.post(f"/api/batches/{body['batch_id']}/cancel")

    assert response.status_code == 202
    assert counts(response.json()) == {"ready": 1, "cancelled": 1, "total": 2}
    assert Job.objects.get(pk=waiting["job_id"]).status == Status.CANCELLED
    assert Job.objects.get(pk=done["job_id"]).status == Status.READY  # finished work stays
    batch = Batch.objects.get(pk=body["batch_id"])
    assert batch.cancel_requested_at is not None and batch.completed_at is not None


def test_cancelling_a_finished_batch_is_refused_and_records_nothing(alice):
    body = post_batch(alice, [("a.pdf", files.text_pdf(["Navy lantern."]))]).json()
    run_until_idle(body["documents"][0]["job_id"])
    events = JobEvent.objects.count()

    response = alice.post(f"/api/batches/{body['batch_id']}/cancel")

    assert response.status_code == 409
    assert response.json()["error"] == {
        "code": "not_allowed",
        "message": "Every file of this batch has finished processing: there is nothing to cancel.",
    }
    assert Batch.objects.get(pk=body["batch_id"]).cancel_requested_at is None
    assert JobEvent.objects.count() == events
    assert alice.get(f"/api/batches/{body['batch_id']}").json()["cancel_requested_at"] is None


def test_another_tenants_batch_is_a_404_and_an_empty_batch_is_refused(alice, mallory):
    body = post_batch(alice, [("a.pdf", files.text_pdf(["Olive grove."]))]).json()
    assert mallory.get(f"/api/batches/{body['batch_id']}").status_code == 404
    assert mallory.post(f"/api/batches/{body['batch_id']}/cancel").status_code == 404
    assert Job.objects.get(pk=body["documents"][0]["job_id"]).status == Status.QUEUED
    assert alice.get("/api/batches/not-an-id").status_code == 404

    empty = alice.post("/api/batches", {}, format="multipart")
    assert empty.status_code == 400 and empty.json()["error"]["code"] == "no_files"
    assert Document.objects.count() == 1


def test_a_job_that_finishes_while_later_files_upload_leaves_the_batch_open(alice):
    """A small file's job can finish before the request has recorded the batch's next file: the
    batch completes with its last job, not with the first."""
    tenant = Tenant.objects.get(slug="acme")
    user = get_user_model().objects.get(username="alice")

    def uploads() -> Iterator[Upload]:
        yield Upload("a.pdf", files.text_pdf(["Copper bell."]))
        run_until_idle(Job.objects.get().pk)  # between two files of the same request
        yield Upload("b.pdf", files.text_pdf(["Slate roof."]))

    with receiver() as hooks:
        register(alice, hooks.url, ["batch.completed"])
        batch = batch_create(tenant=tenant, files=uploads(), user=user)
        assert batch.completed_at is None  # b.pdf's job is still queued
        assert not WebhookMessage.objects.exists()
        [second] = batch.items.exclude(job_id=batch.items.get(position=0).job_id)
        run_until_idle(second.job_id)

    batch.refresh_from_db()
    assert batch.completed_at is not None
    [message] = WebhookMessage.objects.all()
    assert message.payload["data"]["file_counts"]["ready"] == 2


def test_jobs_run_inline_at_upload_complete_their_batch(alice, monkeypatch):
    """With django-q2's sync mode (``Q_SYNC=1``: each job runs inside its upload's request, before
    its batch item exists) the batch still completes once every file is recorded. The request's
    process is no q2 worker: it gets no worker heartbeat, no drain guard and no SIGTERM handler
    (the guard would end the process at the next drain)."""
    monkeypatch.setattr(Conf, "SYNC", True)
    sigterm = signal.getsignal(signal.SIGTERM)
    body = post_batch(
        alice,
        [
            ("a.pdf", files.text_pdf(["Amber lamp."])),
            ("bad.exe", NOT_A_DOCUMENT),
            ("b.pdf", files.text_pdf(["Teal door."])),
        ],
    ).json()

    assert counts(body) == {"ready": 2, "total": 2, "rejected": 1}
    assert body["completed_at"] is not None
    assert signal.getsignal(signal.SIGTERM) is sigterm
    assert not {"jobs-drain-guard", "jobs-worker-beat"} & {t.name for t in threading.enumerate()}
