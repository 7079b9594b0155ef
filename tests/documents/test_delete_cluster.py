"""Deletes against real processes: a document deleted mid-OCR on a real django-q2 cluster, and a
delete whose cleanup process is SIGKILLed half-way, finished by a real reaper loop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from documents.models import Deletion, Document, DocumentVersion, Page
from documents.services.delete import document_delete
from jobs.models import Status
from tests.conftest import ROOT, Processes, wait_for
from tests.documents import files
from tests.documents.helpers import files_under, make_tenant, reload_job, run_until_idle, top_hit, upload
from tests.documents.test_delete import derived_rows
from tests.documents.test_ingest_cluster import (  # noqa: F401  (fixtures)
    check_jobs,
    env,
    platform,
    scanned_pages_pdf,
    scratch,
    wait_status,
)

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

# Runs in a child process: the delete's after-commit cleanup removes the derived rows, then the
# process hangs until the test kills it (before the stored bytes and the rows are removed).
KILLED_MID_CLEANUP = """
import sys, threading
import django
django.setup()
from documents.models import Tenant
from documents.services import delete
real = delete.remove_outputs
def remove_then_hang(version_id, from_stage):
    real(version_id, from_stage)
    print("outputs removed", flush=True)
    threading.Event().wait()
delete.remove_outputs = remove_then_hang
delete.document_delete(tenant=Tenant.objects.get(slug="acme"), document_id=sys.argv[1])
"""


def leftovers_found(child_env: dict[str, str]) -> bool:
    """Whether ``manage.py check_jobs`` reports leftovers of a deleted document (exit 1)."""
    run = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "check_jobs"],
        env=child_env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    found = "FAIL deleted_document_leftovers" in run.stdout
    assert run.returncode == (1 if found else 0), run.stdout + run.stderr
    return found


def test_a_document_deleted_mid_ocr_on_a_cluster_leaves_nothing(platform, env, settings):  # noqa: F811
    tenant = make_tenant("acme")
    result = upload(tenant, scanned_pages_pdf(10), "scan.pdf")
    assert result.job is not None
    wait_for(
        lambda: Page.objects.filter(version=result.version, ocr_attempts__gte=1).exists(),
        timeout=60,
        what="OCR to start",
    )
    assert reload_job(result.job).stage == "ocr"

    deleted = document_delete(tenant=tenant, document_id=result.document.pk)

    assert deleted is not None and deleted.pending
    assert Document.objects.get(pk=result.document.pk).deleted_at is not None
    wait_status(result.job, Status.CANCELLED, platform, timeout=30)
    # The worker that finished the cancel finished the deletion too (or the reaper did).
    wait_for(
        lambda: Deletion.objects.get(pk=deleted.deletion.pk).cleaned_at is not None,
        timeout=30,
        what="the deletion's cleanup",
    )
    assert derived_rows(result.document.pk) == 0
    assert not DocumentVersion.objects.filter(document_id=result.document.pk).exists()
    assert files_under(Path(settings.MEDIA_ROOT)) == []
    assert top_hit(tenant, "KESTREL PAGE") is None
    check_jobs({**env, "DOCUMENTS_DELETE_AUDIT_GRACE": "0"})


def test_a_cleanup_killed_half_way_is_finished_by_the_reaper(processes: Processes, env, settings):  # noqa: F811
    tenant = make_tenant("acme")
    result = upload(tenant, files.text_pdf(["Vermilion kite over the quarry.", "Page two."]), "kite.pdf")
    assert result.job is not None
    assert run_until_idle(result.job.pk).status == Status.READY
    doc = result.document.pk
    audit_env = {**env, "DOCUMENTS_DELETE_AUDIT_GRACE": "0"}

    child = processes.start("deleter", ["-c", KILLED_MID_CLEANUP, str(doc)], env)
    wait_for(lambda: derived_rows(doc) == 0 and Deletion.objects.filter(document_id=doc).exists(), timeout=60)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait(timeout=10)

    # Committed: invisible at once; half cleaned: the bytes and the version rows are still there.
    assert top_hit(tenant, "Vermilion kite") is None
    assert Deletion.objects.get(document_id=doc).cleaned_at is None
    assert len(files_under(Path(settings.MEDIA_ROOT))) == 1
    assert leftovers_found(audit_env)  # the audit sees what the dead process left

    processes.manage("reaper", ["reap_jobs", "--interval", "0.5"], env)
    wait_for(
        lambda: Deletion.objects.get(document_id=doc).cleaned_at is not None,
        timeout=30,
        what="the reaper to finish the deletion",
    )
    assert files_under(Path(settings.MEDIA_ROOT)) == []
    assert not Document.objects.filter(pk=doc).exists()
    assert not leftovers_found(audit_env)
