"""The tenant admin's re-index action needs its own permission: a staff user who may only view
(or even edit) workspaces is refused and nothing starts; one given the permission starts it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from documents.embedders import configured_embedder
from documents.kinds import REINDEX as KIND
from documents.models import Tenant
from jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


def staff(username: str, *codenames: str) -> Client:
    user = User.objects.create_user(username=username, password="pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="documents", codename__in=codenames)
    )
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def new_embedder(settings) -> Iterator[None]:
    settings.EMBEDDINGS_HASHING_DIMENSION = 512  # the operator changed the configured embedder
    configured_embedder.cache_clear()
    yield
    configured_embedder.cache_clear()


def reindex(client: Client, tenant: Tenant) -> str:
    form = {"action": "start_reindex", "_selected_action": [tenant.pk]}
    return client.post("/admin/documents/tenant/", form, follow=True).content.decode()


def test_staff_without_the_reindex_permission_cannot_start_one(new_embedder):
    tenant = Tenant.objects.create(slug="acme", name="Acme", active_embedder="hashing-v1-1024")
    for who, codenames in (("viewer", ("view_tenant",)), ("editor", ("view_tenant", "change_tenant"))):
        client = staff(who, *codenames)
        page = client.get("/admin/documents/tenant/")
        assert page.status_code == 200 and "start_reindex" not in page.content.decode()  # not offered
        reindex(client, tenant)  # and refused when posted anyway
    assert not Job.objects.filter(kind=KIND).exists()
    assert Tenant.objects.get(pk=tenant.pk).target_embedder == ""
    # The same post by an operator with the permission would have started it (the test below).


def test_staff_with_the_reindex_permission_starts_one(new_embedder):
    tenant = Tenant.objects.create(slug="acme", name="Acme", active_embedder="hashing-v1-1024")
    client = staff("operator", "view_tenant", "reindex_tenant")
    assert "start_reindex" in client.get("/admin/documents/tenant/").content.decode()
    assert "re-index to hashing-v1-512 started" in reindex(client, tenant)
    job = Job.objects.get(kind=KIND)
    assert job.events.filter(actor="operator").exists()
