"""State for the access tests, made through the services: a workspace with members, documents
indexed by the real pipeline, and who sees what through search and the lists."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model

from documents.models import Collection, Document, Tenant
from documents.principals import Viewer
from documents.search import MODES, search
from documents.selectors import documents_of, viewer_for
from documents.services.accounts import user_create_in_tenant
from documents.services.collections import collection_create
from documents.services.groups import membership_set_admin
from documents.services.upload import document_upload
from jobs.models import Status
from tests.documents.helpers import run_until_idle

# Every document holds the query word (all modes find each of them) and a word of its own.
QUERY = "zephyr"


def member(username: str, tenant_slug: str = "acme", *, admin: bool = False) -> Any:
    user_create_in_tenant(username=username, tenant_slug=tenant_slug)
    user = get_user_model().objects.get(username=username)
    if admin:
        membership_set_admin(membership=user.memberships.get(), is_admin=True)
    return user


def tenant_of(user: Any) -> Tenant:
    return Tenant.objects.get(memberships__user=user)


def viewer(user: Any) -> Viewer:
    fresh = get_user_model().objects.get(pk=user.pk)  # no permission cache from an earlier read
    return viewer_for(fresh, tenant_of(fresh))


def indexed(
    user: Any, name: str, collection: Collection | None = None, access: list[str] | None = None
) -> Document:
    """A document uploaded by ``user`` and processed to ``ready`` by the real pipeline."""
    text = f"{QUERY} {QUERY} notes about {name}.\n\nThe {QUERY} report on {name} continues here.\n"
    result = document_upload(
        tenant=tenant_of(user),
        data=text.encode(),
        filename=f"{name}.txt",
        title=name,
        user=user,
        collection=collection,
        access=access,
    )
    assert result.job is not None
    assert run_until_idle(result.job.pk).status == Status.READY
    return Document.objects.get(pk=result.document.pk)


def collection(tenant: Tenant, name: str) -> Collection:
    return collection_create(tenant=tenant, name=name)


def found(user: Any, mode: str) -> set[Any]:
    """The documents ``user``'s search in ``mode`` finds (k far above the corpus)."""
    who = viewer(user)
    tenant = Tenant.objects.get(pk=who.tenant_id)
    return {h.document_id for h in search(tenant, QUERY, 100, mode=mode, viewer=who)}


def listed(user: Any) -> set[Any]:
    return set(documents_of(viewer(user)).values_list("pk", flat=True))


def seen_everywhere(user: Any) -> dict[str, set[Any]]:
    """What the user finds in each search mode and sees in the document list."""
    return {**{mode: found(user, mode) for mode in MODES}, "list": listed(user)}


def same_everywhere(user: Any, expected: set[Any]) -> None:
    seen = seen_everywhere(user)
    assert seen == {name: expected for name in seen}, (getattr(user, "username", user), seen, expected)


def private_to(owner: Any) -> Document:
    """A document only ``owner`` may see (its own user on its list), processed to ``ready``."""
    result = document_upload(
        tenant=tenant_of(owner),
        data=b"Salaries by the tide: the payroll of every deckhand.",
        filename="salaries.txt",
        title="Salaries by the tide",
        user=owner,
        access=[f"user:{owner.pk}"],
    )
    assert result.job is not None and run_until_idle(result.job.pk).status == Status.READY
    return Document.objects.get(pk=result.document.pk)
