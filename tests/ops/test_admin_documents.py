"""Document jobs: the OCR retry variants (smaller batch, alternative engine) are offered for OCR
failures only, carry the hints the OCR stage understands, and follow the cause like any retry.
Tenant quotas are edited on the Tenant admin; documents and versions are read-only there."""

from __future__ import annotations

import uuid

import pytest
from django.conf import settings

from documents.models import Document, Tenant
from documents.stages import ocr
from jobs.models import Job
from jobs.services.worker import job_claim
from tests.ops.helpers import (
    act,
    advance_to,
    document_job,
    fail,
    job_url,
    lose_workers_until_failed,
    messages_of,
    offered_on_page,
    short,
    tenant,
)

pytestmark = pytest.mark.django_db

VARIANTS = {"retry_smaller_batch", "retry_alternative_ocr"}


def test_an_ocr_failure_offers_both_variants_besides_the_plain_and_forced_retries(senior, operator):
    job = lose_workers_until_failed(document_job(), "ocr")
    assert (job.status, job.stage, job.error_code) == ("failed", "ocr", "worker_lost")
    assert offered_on_page(senior.get(job_url(job)).content.decode()) == {
        "retry",
        *VARIANTS,
        "force_retry",
        "restart",
    }
    assert offered_on_page(operator.get(job_url(job)).content.decode()) == {"retry", *VARIANTS}


def test_retry_with_the_alternative_engine_queues_ocr_with_that_hint(operator):
    job = lose_workers_until_failed(document_job(), "ocr")
    response = act(operator, "retry_alternative_ocr", [job], reason="tesseract keeps dying")
    assert messages_of(response) == [f"1 job queued again with ocr_engine=alternative: {short(job)}."]
    job = Job.objects.get(pk=job.pk)
    assert (job.status, job.stage, job.hints) == ("queued", "ocr", {"ocr_engine": "alternative"})
    claim = job_claim(job_id=job.pk, worker="w2")
    assert claim is not None and claim.run.hints == {"ocr_engine": "alternative"}
    default = ocr.engine_for({})
    assert ocr.engine_for(claim.job.hints) == (ocr.ocr.alternative_engine_name(default) or default)


def test_retry_with_a_smaller_batch_halves_the_ocr_batch(operator):
    job = lose_workers_until_failed(document_job(), "ocr")
    act(operator, "retry_smaller_batch", [job], reason="batches time out")
    job = Job.objects.get(pk=job.pk)
    assert job.hints == {"batch_size": "halve"}
    assert ocr.batch_size_for(job.hints) == max(1, int(settings.OCR_BATCH_SIZE) // 2)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_variants_do_not_apply_to_a_failure_at_another_stage(operator, variant):
    job = lose_workers_until_failed(document_job(), "parsing")
    assert job.stage == "parsing"
    notes = messages_of(act(operator, variant, [job]))
    assert notes == [f"Skipped 1 job (only for document.ingest jobs that failed at ocr): {short(job)}."]
    assert Job.objects.get(pk=job.pk).status == "failed"


def test_the_variants_follow_the_cause_a_permanent_ocr_failure_needs_a_forced_restart(operator, senior):
    job = fail(advance_to(document_job(), "ocr"), "corrupt_input")
    notes = messages_of(act(operator, "retry_alternative_ocr", [job]))
    # The same reason a user gets (jobs/rules.py), plus what an operator can click instead.
    why = (
        "This failure (corrupt_input) cannot be fixed by retrying. The file is damaged and could not"
        " be read. Upload an intact copy. To retry anyway, use “Force a retry of the failed stage”"
        " (force-retry permission)."
    )
    assert notes == [f"Skipped 1 job ({why}): {short(job)}."]
    act(senior, "restart", [job], reason="new parser")
    job = Job.objects.get(pk=job.pk)
    assert (job.status, job.stage) == ("queued", "parsing")


def test_tenant_quotas_are_editable_in_the_tenant_admin(admin_client):
    acme = tenant("acme", max_running_jobs=4, max_queued_jobs=200)
    document_job("acme")
    listing = admin_client.get("/admin/documents/tenant/")
    html = listing.content.decode()
    assert listing.status_code == 200 and 'name="form-0-max_running_jobs"' in html
    response = admin_client.post(
        f"/admin/documents/tenant/{acme.pk}/change/",
        {"name": "Acme", "max_running_jobs": 2, "max_queued_jobs": 10},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    acme.refresh_from_db()
    assert (acme.slug, acme.max_running_jobs, acme.max_queued_jobs) == ("acme", 2, 10)
    from jobs.quotas import quota_for

    assert quota_for("acme").max_running == 2  # the engine sees it at the next claim


def test_the_tenant_list_shows_running_and_waiting_jobs_beside_the_quotas(admin_client):
    tenant("acme")
    document_job("acme")
    document_job("acme", text="Second note.")
    html = admin_client.get("/admin/documents/tenant/").content.decode()
    row = html[html.index(">acme<") :].split("</tr>")[0]
    assert '<td class="field-waiting_now">2</td>' in row and '<td class="field-running_now">0</td>' in row


def test_documents_and_versions_are_read_only_and_tenants_are_never_deleted(admin_client):
    job = document_job()
    document = Document.objects.get(pk=job.subject_id)
    assert admin_client.get("/admin/documents/document/add/").status_code == 403
    assert (
        admin_client.post(f"/admin/documents/document/{document.pk}/change/", {"title": "x"}).status_code
        == 403
    )
    assert admin_client.get(f"/admin/documents/document/{document.pk}/delete/").status_code == 403
    assert admin_client.get("/admin/documents/documentversion/add/").status_code == 403
    acme = Tenant.objects.get(slug="acme")
    assert admin_client.get(f"/admin/documents/tenant/{acme.pk}/delete/").status_code == 403
    assert admin_client.get("/admin/documents/membership/").status_code == 200
    assert admin_client.get(f"/admin/documents/document/?q={document.pk}").status_code == 200
    assert admin_client.get("/admin/documents/document/?q=not-a-uuid").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_a_restarted_document_job_runs_through_the_real_pipeline_to_ready(settings, tmp_path):
    from tests.documents.helpers import found_versions, run_until_idle
    from tests.ops.conftest import FORCE, OPERATE, VIEW, login, make_staff

    settings.MEDIA_ROOT = tmp_path / "media"
    job = document_job(text="Cobalt harbour wakes before the fishing boats.")
    job = fail(advance_to(job, "chunking"), "corrupt_input")  # say, a chunker bug since fixed
    assert (job.status, job.stage) == ("failed", "chunking")
    senior = login(make_staff("sam", VIEW, OPERATE, FORCE))
    act(senior, "restart", [job], reason="chunker fixed in 2.4")
    job = run_until_idle(job.pk)
    assert job.status == "ready", (job.status, job.stage, job.error_code)
    assert found_versions(Tenant.objects.get(slug="acme"), "cobalt harbour") == {
        uuid.UUID(job.payload["version_id"])
    }
