"""The job list shows a document job's subject as the document's title and version, linked to
the document (through the subject-labels registry: jobs/ knows no documents), in one query for
the page."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from documents.models import Document, DocumentVersion
from documents.services.reindex import reindex_start
from tests.ops.helpers import JOBS, document_job, job_url, running, tenant
from tests.ops.test_admin_lists import row_of

pytestmark = pytest.mark.django_db


def see_every_document(username: str) -> None:
    """``documents.view_all_documents``: the titles of every workspace's documents."""
    User.objects.get(username=username).user_permissions.add(
        Permission.objects.get(content_type__app_label="documents", codename="view_all_documents")
    )


def test_a_document_jobs_subject_is_its_title_and_version_linked_to_the_document(viewer):
    see_every_document("vera")
    job = document_job()
    version = DocumentVersion.objects.get(job_id=job.pk)
    Document.objects.filter(pk=version.document_id).update(title="Harbour <lights> report")
    toy = running(worker="host-b:7")  # a kind without labels keeps the short id
    html = viewer.get(JOBS).content.decode()
    row = row_of(html, job)
    url = f"/admin/documents/document/{version.document_id}/change/"
    assert f'<a class="jobs-subject" href="{url}" title="v1 · Harbour &lt;lights&gt; report">' in row
    assert ">v1 · Harbour &lt;lights&gt; report</a>" in row
    assert toy.subject_id[:8] in row_of(html, toy)


def test_the_labels_cost_one_query_for_the_page_not_one_per_row(viewer):
    for _ in range(3):
        document_job()
    with CaptureQueriesContext(connection) as three:
        viewer.get(JOBS)
    for _ in range(5):
        document_job()
    with CaptureQueriesContext(connection) as eight:
        viewer.get(JOBS)
    assert len(eight.captured_queries) == len(three.captured_queries)


def test_a_reindex_jobs_subject_is_its_run_and_workspace_linked_to_the_workspace(viewer):
    workspace = tenant("acme", name="Acme Harbour")
    job = reindex_start(tenant=workspace, embedder="hashing:512")
    row = row_of(viewer.get(JOBS).content.decode(), job)
    url = f"/admin/documents/tenant/{workspace.pk}/change/"
    assert f'<a class="jobs-subject" href="{url}" title="re-index 1 · Acme Harbour">' in row
    assert f"{workspace.pk} v1" not in row
    page = viewer.get(job_url(job)).content.decode()
    assert f'<a href="{url}">workspace acme</a>' in page
