"""Starting and following a re-index: the API (start, status with versions and chunks done,
409 for a second one, 404 for another tenant's), ``manage.py reindex`` and the tenant admin's
action, each through the same service."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from documents.checks import check_embedding_dimension
from documents.kinds import REINDEX as KIND
from documents.models import Tenant
from jobs.models import Job, Status
from tests.documents.helpers import run_until_idle, upload
from tests.documents.test_delete import client_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alice(settings, tmp_path) -> APIClient:
    settings.MEDIA_ROOT = tmp_path / "media"
    client = client_for("alice", "acme")
    tenant = Tenant.objects.get(slug="acme")
    for n, text in enumerate(("The harbour master logged boats.", "Orchard trees were pruned.")):
        result = upload(tenant, text.encode(), f"d{n}.txt")
        assert result.job is not None and run_until_idle(result.job.pk).status == Status.READY
    return client


def test_the_api_starts_a_reindex_reports_it_and_refuses_a_second(alice):
    started = alice.post("/api/reindex", {"embedder": "hashing:512"}, format="json")
    assert started.status_code == 202, started.content
    body = started.json()
    assert (body["status"], body["embedder"], body["previous_embedder"]) == (
        "queued",
        "hashing-v1-512",
        "hashing-v1-1024",
    )
    assert body["versions"] == {"done": 0, "total": 2} and body["chunks"]["done"] == 0

    again = alice.post("/api/reindex", {"embedder": "hashing:256"}, format="json")
    assert again.status_code == 409 and again.json()["error"]["code"] == "reindex_running"

    assert run_until_idle(body["job_id"]).status == Status.READY
    status = alice.get(f"/api/reindex/{body['job_id']}").json()
    assert (status["status"], status["progress"]) == ("ready", 100.0)
    assert status["versions"] == {"done": 2, "total": 2}
    assert status["chunks"]["done"] == status["chunks"]["total"] > 0
    assert Tenant.objects.get(slug="acme").active_embedder == "hashing-v1-512"


def test_another_tenant_gets_404_and_bad_input_a_specific_error(alice):
    job = alice.post("/api/reindex", {"embedder": "hashing:512"}, format="json").json()["job_id"]
    mallory = client_for("mallory", "globex")
    assert mallory.get(f"/api/reindex/{job}").status_code == 404
    assert mallory.post(f"/api/reindex/{job}/cancel").status_code == 404
    assert alice.get("/api/reindex/not-a-job").status_code == 404
    unknown = alice.post("/api/reindex", {"embedder": "gpt-9"}, format="json")
    assert unknown.status_code == 400 and unknown.json()["error"]["code"] == "unknown_embedder"
    cancelled = alice.post(f"/api/reindex/{job}/cancel")
    assert cancelled.status_code == 202 and cancelled.json()["status"] in ("cancelled", "cancel_requested")


def test_manage_py_reindex_runs_one_inline_and_refuses_a_second(alice):
    out = StringIO()
    call_command("reindex", "--tenant", "acme", "--embedder", "hashing:512", "--inline", stdout=out)
    assert "hashing-v1-1024 -> hashing-v1-512" in out.getvalue()
    assert "versions 2/2" in out.getvalue()
    assert Tenant.objects.get(slug="acme").active_embedder == "hashing-v1-512"
    with pytest.raises(CommandError, match="already searches"):
        call_command("reindex", "--tenant", "acme", "--embedder", "hashing-v1-512", stdout=StringIO())
    with pytest.raises(CommandError, match="no workspace"):
        call_command("reindex", "--tenant", "nobody", stdout=StringIO())


def test_the_tenant_admin_action_starts_one_reindex_per_tenant(alice, admin_client, settings):
    from documents.embedders import configured_embedder

    tenant = Tenant.objects.get(slug="acme")
    form = {"action": "start_reindex", "_selected_action": [tenant.pk]}
    response = admin_client.post("/admin/documents/tenant/", form, follow=True)
    assert "already searches with that embedder" in response.content.decode()
    assert not Job.objects.filter(kind=KIND).exists()

    settings.EMBEDDINGS_HASHING_DIMENSION = 512  # the operator changed the configured embedder
    configured_embedder.cache_clear()
    try:
        response = admin_client.post("/admin/documents/tenant/", form, follow=True)
        assert "re-index to hashing-v1-512 started" in response.content.decode()
        job = Job.objects.get(kind=KIND)
        assert job.payload["target"] == "hashing-v1-512"
        assert job.events.filter(actor="operator").exists()  # the creation, as the operator
        response = admin_client.post("/admin/documents/tenant/", form, follow=True)
        assert "already running" in response.content.decode()
        assert Job.objects.filter(kind=KIND).count() == 1
        assert run_until_idle(job.pk).status == Status.READY
    finally:
        configured_embedder.cache_clear()


def test_an_embedder_wider_than_the_bound_is_refused_everywhere(alice, settings):
    # "hashing:1000000" stored 4 MB per chunk: refused by the API, the command and the start check
    refused = alice.post("/api/reindex", {"embedder": "hashing:1000000"}, format="json")
    assert refused.status_code == 400, refused.content
    error = refused.json()["error"]
    assert error["code"] == "embedder_too_wide" and "4096" in error["message"]
    assert Job.objects.filter(kind=KIND).count() == 0
    with pytest.raises(CommandError):
        call_command(
            "reindex", "--tenant", "acme", "--embedder", "hashing:8192", "--inline", stdout=StringIO()
        )
    assert Job.objects.filter(kind=KIND).count() == 0
    settings.EMBEDDINGS_MAX_DIMENSION = 8192
    assert alice.post("/api/reindex", {"embedder": "hashing:8192"}, format="json").status_code == 202
    settings.EMBEDDINGS_HASHING_DIMENSION = 10_000
    assert [e.id for e in check_embedding_dimension()] == ["documents.E003"]
