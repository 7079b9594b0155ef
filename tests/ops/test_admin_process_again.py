"""The documents admin's "process again": the same service as the pages and the API (a new
version from the stored file, a new job recorded as the operator's), only for a cancelled or
failed latest version, and only for staff with the routine job power."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from documents.models import DocumentVersion
from jobs.models import Actor, JobEvent, Status
from jobs.services.lifecycle import job_cancel
from tests.ops.conftest import login, make_staff
from tests.ops.helpers import document_job, messages_of

pytestmark = pytest.mark.django_db(transaction=True)

CHANGELIST = "admin:documents_document_changelist"


@pytest.fixture(autouse=True)
def media(settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return Path(settings.MEDIA_ROOT)


def _staff(username: str, *jobs_codenames: str) -> Client:
    user = make_staff(username, *jobs_codenames)
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="documents", codename__in=["view_document", "view_all_documents"]
        )
    )
    return login(user)


def _act(client: Client, *document_ids: object):
    selected = [str(pk) for pk in document_ids]
    return client.post(
        reverse(CHANGELIST), {"action": "process_again", "_selected_action": selected}, follow=True
    )


def test_the_admin_processes_a_cancelled_document_again_as_the_operators_new_version():
    job = document_job()
    job_cancel(job_id=job.pk, actor_name="someone")
    document_id = DocumentVersion.objects.get(job_id=job.pk).document_id
    ready_job = document_job(text="Another note.")
    other_id = DocumentVersion.objects.get(job_id=ready_job.pk).document_id

    response = _act(_staff("olga", "view_job", "change_job"), document_id, other_id)

    assert messages_of(response) == [
        "Processing again (a new version each): “note.txt” as v2.",
        "These were not processed again: “note.txt”: Only a cancelled or failed version can be "
        "processed again; this one is “Queued”.",
    ]
    new = DocumentVersion.objects.get(document_id=document_id, number=2)
    assert new.job is not None and new.job.status == Status.QUEUED
    event = JobEvent.objects.get(job_id=new.job_id, to_status=Status.QUEUED)
    assert (event.actor, event.actor_name) == (Actor.OPERATOR, "olga")


def test_when_none_applies_the_admin_says_so_plainly():
    job = document_job()
    document_id = DocumentVersion.objects.get(job_id=job.pk).document_id
    response = _act(_staff("olga", "view_job", "change_job"), document_id)
    assert messages_of(response) == [
        "None was processed again: “note.txt”: Only a cancelled or failed version can be processed "
        "again; this one is “Queued”."
    ]
    assert DocumentVersion.objects.filter(document_id=document_id).count() == 1


def test_the_action_needs_the_routine_job_power():
    job = document_job()
    job_cancel(job_id=job.pk, actor_name="someone")
    document_id = DocumentVersion.objects.get(job_id=job.pk).document_id
    viewer = _staff("vera", "view_job")
    page = viewer.get(reverse(CHANGELIST)).content.decode()
    assert 'value="process_again"' not in page
    _act(viewer, document_id)
    assert DocumentVersion.objects.filter(document_id=document_id).count() == 1
