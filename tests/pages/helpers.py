"""Members of tenants and jobs in every state, made through the services.

``user_create_in_tenant``, ``document_upload``, ``job_claim``, ``job_report_progress``,
``run_job`` and ``job_give_up`` make the state; nothing is inserted raw.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from fpdf import FPDF

from documents.models import Document, Tenant
from documents.services.accounts import user_create_in_tenant
from documents.services.upload import UploadResult, document_upload
from jobs.executor import run_job
from jobs.models import Actor, Job
from jobs.services.lifecycle import job_give_up
from jobs.services.transition import apply_transition
from jobs.services.worker import Claim, job_claim, job_report_progress
from tests.documents.files import PAGE_PHRASES, encrypted_pdf, text_image, text_pdf

PASSWORD = "correct-horse-battery"
FIXED_DATE = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)  # the same bytes on every run


@dataclass
class Member:
    username: str
    tenant: Tenant
    client: Client

    def upload(self, data: bytes, filename: str, title: str = "") -> UploadResult:
        return document_upload(tenant=self.tenant, data=data, filename=filename, title=title)

    def upload_version(
        self, of: UploadResult, data: bytes, *, name: str = "next.pdf", run: bool = False
    ) -> UploadResult:
        """A new version of ``of``'s document; with ``run``, processed to its end here."""
        document = Document.objects.get(pk=of.document.pk)
        result = document_upload(tenant=self.tenant, data=data, filename=name, document=document)
        if run:
            assert result.job is not None
            run_job(result.job.pk)
        return result

    @property
    def user(self) -> Any:
        return get_user_model().objects.get(username=self.username)


def make_member(username: str, tenant_slug: str) -> Member:
    user_create_in_tenant(username=username, tenant_slug=tenant_slug, password=PASSWORD)
    client = Client()
    assert client.login(username=username, password=PASSWORD)
    return Member(username, Tenant.objects.get(slug=tenant_slug), client)


# --- jobs in a given state -----------------------------------------------------------------------


def queued(member: Member, title: str = "Harbor notes") -> UploadResult:
    return member.upload(text_pdf(), "harbor.pdf", title)


def running(member: Member, *, done: int = 130, total: int | None = 200) -> tuple[UploadResult, Claim]:
    """A job claimed by a worker, parsing ``done`` of ``total`` pages."""
    result = queued(member)
    assert result.job is not None
    claim = job_claim(job_id=result.job.pk, worker="page-test")
    assert claim is not None
    if total is not None:
        job_report_progress(job_id=claim.job_id, token=claim.token, done=done, total=total)
    return result, claim


def ready(member: Member, data: bytes | None = None, title: str = "Harbor notes") -> UploadResult:
    """A document processed to ``ready`` in this process (the real pipeline)."""
    result = member.upload(data or text_pdf(), "harbor.pdf", title)
    assert result.job is not None
    assert run_job(result.job.pk) == "done"
    return result


def failed_reupload(member: Member) -> UploadResult:
    """A password-protected PDF: the real parser fails it (encrypted_input, re-upload)."""
    result = member.upload(encrypted_pdf(), "locked.pdf", "Locked report")
    assert result.job is not None
    run_job(result.job.pk)
    return result


def failed_retryable(member: Member) -> UploadResult:
    """A job whose worker vanished and an operator gave up on: worker_lost, users may retry."""
    result, claim = running(member)
    later = timezone.now() + timedelta(hours=1)
    job = Job.objects.get(pk=claim.job_id)
    apply_transition(job, "mark_stalled", actor=Actor.REAPER, now=later)
    job_give_up(job_id=job.pk, actor_name="operator")
    return result


def job_id_of(result: UploadResult) -> Any:
    assert result.job is not None
    return result.job.pk


def job(result: UploadResult) -> Job:
    assert result.job is not None
    return Job.objects.get(pk=result.job.pk)


PHRASE = PAGE_PHRASES[1]


def detail_url(result: UploadResult) -> str:
    return f"/documents/{result.document.pk}/"


def job_url(result: UploadResult, action: str) -> str:
    assert result.job is not None
    return f"/documents/{result.document.pk}/jobs/{result.job.pk}/{action}"


def html(response: Any) -> str:
    return response.content.decode()


def scanned_pages_pdf(pages: int, *, start: int = 1) -> bytes:
    """A PDF of image-only pages (each needs OCR): a document that takes a few seconds."""
    pdf = FPDF()
    pdf.set_creation_date(FIXED_DATE)
    for number in range(start, start + pages):
        pdf.add_page()
        pdf.image(text_image([f"SCANNED PAGE {number}", *PAGE_PHRASES[:2]], size=48), x=15, y=20, w=180)
    return bytes(pdf.output())
