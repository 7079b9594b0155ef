"""Document jobs: the OCR retry variants (smaller batch, alternative engine) are offered for OCR
failures only, carry the hints the OCR stage understands, and follow the cause like any retry.
Tenant quotas are edited on the Tenant admin; a document's title and attributes are edited there
through the attribute service; versions are read-only."""

from __future__ import annotations

import re
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


def test_documents_are_never_added_or_deleted_versions_are_read_only_tenants_never_deleted(admin_client):
    job = document_job()
    document = Document.objects.get(pk=job.subject_id)
    assert admin_client.get("/admin/documents/document/add/").status_code == 403
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


# --- a document's title and attributes -----------------------------------------------------------


def change_document(client, document: Document, title: str, attributes: str):
    """Submit the change form as a browser would: its hidden fields (the read-only versions
    inline's management form) plus the two editable fields."""
    url = f"/admin/documents/document/{document.pk}/change/"
    page = client.get(url)
    hidden = (
        dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page.content.decode()))
        if page.status_code == 200
        else {}
    )
    return client.post(url, {**hidden, "title": title, "attributes": attributes})


def test_the_admin_edits_a_documents_title_and_attributes(admin_client):
    document = Document.objects.get(pk=document_job().subject_id)
    page = admin_client.get(f"/admin/documents/document/{document.pk}/change/").content.decode()
    assert 'name="title"' in page and 'name="attributes"' in page
    assert 'name="tenant"' not in page  # everything else stays read-only

    response = change_document(
        admin_client, document, "Contract", '{"year": 2024, "signed_on": "2024-03-01"}'
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    document.refresh_from_db()
    assert (document.title, document.attributes) == ("Contract", {"year": 2024, "signed_on": "2024-03-01"})


@pytest.mark.parametrize(
    ("attributes", "shown"),
    [
        ('{"signed_on": "2024-02-30"}', "signed_on: A YYYY-MM-DD value must be a real calendar date."),
        ('{"bad key": 1}', "is not a valid attribute name"),
        ('["a"]', "Attributes must be a JSON object"),
        ("{not json", "Enter a valid JSON."),
    ],
)
def test_the_admin_refuses_bad_attributes_with_the_services_message(admin_client, attributes, shown):
    document = Document.objects.get(pk=document_job().subject_id)
    before = (document.title, document.attributes)

    response = change_document(admin_client, document, "Contract", attributes)

    assert response.status_code == 200
    assert shown in response.content.decode()
    document.refresh_from_db()
    assert (document.title, document.attributes) == before


def test_editing_documents_needs_the_change_document_permission(operator):
    document = Document.objects.get(pk=document_job().subject_id)
    assert change_document(operator, document, "Owned", "{}").status_code == 403
    from django.contrib.auth.models import Permission, User

    user = User.objects.get(username="olga")
    user.user_permissions.add(Permission.objects.get(codename="change_document"))
    # An operator of no workspace sees a document in the admin only with view_all_documents.
    assert change_document(operator, document, "Edited", '{"a": 1}').status_code == 302
    document.refresh_from_db()
    assert document.title != "Edited"
    user.user_permissions.add(Permission.objects.get(codename="view_all_documents"))
    assert change_document(operator, document, "Edited", '{"a": 1}').status_code == 302
    document.refresh_from_db()
    assert (document.title, document.attributes) == ("Edited", {"a": 1})


def test_the_collection_admin_lists_counts_and_deletes_through_the_service(admin_client, settings, tmp_path):
    from documents.models import Collection, Deletion

    settings.MEDIA_ROOT = tmp_path / "media"
    document = Document.objects.get(pk=document_job().subject_id)
    collection = document.collection
    page = admin_client.get("/admin/documents/collection/").content.decode()
    assert collection.name in page and '<td class="field-documents">1</td>' in page
    assert admin_client.get(f"/admin/documents/collection/{collection.pk}/change/").status_code == 200

    response = admin_client.post(
        "/admin/documents/collection/",
        {"action": "delete_collections", "_selected_action": [str(collection.pk)]},
    )

    assert response.status_code == 302
    assert not Collection.objects.filter(pk=collection.pk).exists()
    assert Deletion.objects.get(document_id=document.pk).via == "admin"
