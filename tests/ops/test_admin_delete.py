"""The admin's delete action goes through the delete service (job cancelled, files removed, an
audit record kept), needs the documents' delete permission, and the audit records are read-only."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from documents.models import Deletion, Document, DocumentVersion
from jobs.models import Job, Status
from tests.documents.helpers import files_under
from tests.ops.helpers import document_job, messages_of

pytestmark = pytest.mark.django_db(transaction=True)  # the cleanup runs after the commit

CHANGELIST = "admin:documents_document_changelist"


def staff(username: str, *codenames: str) -> Client:
    user = User.objects.create_user(username=username, password="pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="documents", codename__in=codenames)
    )
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture(autouse=True)
def media(settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return Path(settings.MEDIA_ROOT)


def delete_action(client: Client, document_id: object) -> object:
    return client.post(
        reverse(CHANGELIST),
        {"action": "delete_with_cleanup", "_selected_action": [str(document_id)]},
        follow=True,
    )


def test_the_admin_action_deletes_through_the_service_and_records_the_operator(media: Path):
    job = document_job()
    document_id = DocumentVersion.objects.get(job_id=job.pk).document_id
    admin = staff("dora", "view_document", "view_all_documents", "delete_document", "view_deletion")

    response = delete_action(admin, document_id)

    assert messages_of(response) == [
        "1 document(s) deleted; their cleanup runs now (the reaper finishes it)."
    ]
    assert Job.objects.get(pk=job.pk).status == Status.CANCELLED
    assert not Document.objects.filter(pk=document_id).exists()
    assert files_under(media) == []
    deletion = Deletion.objects.get(document_id=document_id)
    assert (deletion.requested_by_name, deletion.via) == ("dora", "admin")
    page = admin.get(reverse("admin:documents_deletion_changelist")).content.decode()
    assert str(document_id) in page and "dora" in page
    change = admin.get(reverse("admin:documents_deletion_change", args=[deletion.pk])).content.decode()
    assert 'name="_save"' not in change  # read-only


def test_the_action_needs_the_delete_permission():
    job = document_job()
    document_id = DocumentVersion.objects.get(job_id=job.pk).document_id
    viewer = staff("vic", "view_document", "view_all_documents")
    page = viewer.get(reverse(CHANGELIST)).content.decode()
    assert "delete_with_cleanup" not in page
    delete_action(viewer, document_id)
    assert Job.objects.get(pk=job.pk).status == Status.QUEUED
    assert not Deletion.objects.exists()
