"""The admin's document pages apply access lists: staff without documents.view_all_documents see
the documents of their own workspace that its lists let them see (none for staff of no
workspace); any other is absent from the lists, the version pages, the jobs console's titles and
the collection counts, and its pages answer exactly as an id that does not exist. Staff with the
permission, and superusers, see every document."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from documents.models import Document, DocumentVersion, Membership, Tenant
from documents.services.accounts import user_create_in_tenant
from documents.services.upload import document_upload
from jobs.models import Job, Status
from tests.ops.conftest import login, make_staff
from tests.ops.helpers import JOBS
from tests.ops.test_admin_lists import row_of

pytestmark = pytest.mark.django_db

DOCUMENT_PERMISSIONS = (
    "view_document",
    "change_document",
    "delete_document",
    "view_documentversion",
    "view_collection",
)


def staff(username: str, *, workspace: str | None, view_all: bool = False) -> Client:
    """A staff member with the documents' admin permissions (and the job list's), a member of
    ``workspace`` when given."""
    user = make_staff(
        username, *DOCUMENT_PERMISSIONS, *(["view_all_documents"] if view_all else []), app="documents"
    )
    user.user_permissions.add(Permission.objects.get(content_type__app_label="jobs", codename="view_job"))
    if workspace is not None:
        user_create_in_tenant(username=username, tenant_slug=workspace)
    return login(user)


def document(title: str, tenant: str = "acme", access: list[str] | None = None) -> Document:
    result = document_upload(
        tenant=Tenant.objects.get(slug=tenant),
        data=f"{title}.\n".encode(),
        filename="n.txt",
        title=title,
        access=access,
    )
    return Document.objects.get(pk=result.document.pk)


@pytest.fixture
def documents() -> dict[str, Document]:
    user_create_in_tenant(username="alice", tenant_slug="acme")
    user_create_in_tenant(username="gil", tenant_slug="globex")
    alice = User.objects.get(username="alice")
    return {
        "shown": document("Harbour notes"),
        "hidden": document("Salaries by the tide", access=[f"user:{alice.pk}"]),
        "elsewhere": document("Globex plans", tenant="globex"),
    }


def page(client: Client, url: str) -> tuple[int, str, str]:
    """The answer's status, where it redirects and its text."""
    answer = client.get(url, follow=False)
    return answer.status_code, answer.get("Location", ""), answer.content.decode()


def as_missing(client: Client, name: str, real: Any) -> None:
    """The admin page ``name`` of ``real`` answers what it answers for an id that does not exist."""
    missing = uuid.uuid4()
    seen = client.get(reverse(name, args=[real]), follow=True)
    unknown = client.get(reverse(name, args=[missing]), follow=True)
    assert seen.status_code == unknown.status_code, name
    assert seen.redirect_chain == unknown.redirect_chain, name
    assert unmasked(seen.content.decode().replace(str(real), str(missing))) == unmasked(
        unknown.content.decode()
    ), name


def unmasked(html: str) -> str:
    """The page without its CSRF token (masked anew on every answer)."""
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", html)


def test_staff_see_in_the_admin_only_the_documents_their_workspace_lets_them_see(documents):
    carol = staff("carol", workspace="acme")
    shown, hidden, elsewhere = documents["shown"], documents["hidden"], documents["elsewhere"]

    listing = page(carol, reverse("admin:documents_document_changelist"))[2]
    assert "Harbour notes" in listing
    assert "Salaries by the tide" not in listing and str(hidden.pk) not in listing
    assert "Globex plans" not in listing
    assert page(carol, reverse("admin:documents_document_change", args=[shown.pk]))[0] == 200
    for name in ("admin:documents_document_change", "admin:documents_document_history"):
        as_missing(carol, name, hidden.pk)
    as_missing(carol, "admin:documents_document_change", elsewhere.pk)

    hidden_version = DocumentVersion.objects.get(document=hidden)
    versions = page(carol, reverse("admin:documents_documentversion_changelist"))[2]
    assert str(hidden_version.pk) not in versions and "Salaries" not in versions
    as_missing(carol, "admin:documents_documentversion_change", hidden_version.pk)

    # The jobs console lists every job (it is about jobs) but names only what she may see.
    jobs = page(carol, JOBS)[2]
    hidden_job = Job.objects.get(pk=hidden_version.job_id)
    assert "Salaries" not in jobs and "Harbour notes" in jobs
    assert str(hidden_job.subject_id)[:8] in row_of(jobs, hidden_job)

    counts = page(carol, reverse("admin:documents_collection_changelist"))[2]
    assert '<td class="field-documents">1</td>' in counts  # acme's default collection: 1 of 2

    # An action posted with a hidden id changes nothing.
    carol.post(
        reverse("admin:documents_document_changelist"),
        {"action": "delete_with_cleanup", "_selected_action": [str(hidden.pk)]},
    )
    assert Document.objects.get(pk=hidden.pk).deleted_at is None
    assert Job.objects.get(pk=hidden_job.pk).status == Status.QUEUED


def test_staff_of_no_workspace_see_no_document_without_the_permission(documents):
    dave = staff("dave", workspace=None)
    listing = page(dave, reverse("admin:documents_document_changelist"))[2]
    for title in ("Harbour notes", "Salaries by the tide", "Globex plans"):
        assert title not in listing
    as_missing(dave, "admin:documents_document_change", documents["shown"].pk)
    assert not Membership.objects.filter(user__username="dave").exists()


def test_view_all_documents_and_superusers_see_every_document(documents):
    auditor = staff("ada", workspace=None, view_all=True)
    root = login(User.objects.create_superuser("root", "root@example.com", "pw-root-12345"))
    for client in (auditor, root):
        listing = page(client, reverse("admin:documents_document_changelist"))[2]
        for title in ("Harbour notes", "Salaries by the tide", "Globex plans"):
            assert title in listing
        hidden = documents["hidden"]
        assert page(client, reverse("admin:documents_document_change", args=[hidden.pk]))[0] == 200
        assert "Salaries by the tide" in page(client, JOBS)[2]
