"""A property of access lists: whatever sequence of group, membership, collection and document
list changes happens, after every step each user finds, in every search mode, and lists exactly
the documents the test's own model says they may see; after the last step, ``/api``'s document
list and ``/v1``'s store search say the same. No leak, no missing document.

The corpus (two workspaces, two collections, documents indexed by the real pipeline) is made
once; each example starts from "everyone sees everything" and applies random steps through the
services. The model below knows nothing of grants: only who is in which group and which list
each collection and document has.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from documents.models import Collection, Document, DocumentGrant, WorkspaceGroup
from documents.services.access import collection_access_set, documents_access_set
from documents.services.groups import group_create, group_delete, group_member_add, group_member_remove
from tests.documents.access_helpers import (
    QUERY,
    collection,
    indexed,
    member,
    same_everywhere,
    tenant_of,
    viewer,
)

pytestmark = pytest.mark.django_db

GROUP_NAMES = ("red", "green", "blue")


@pytest.fixture(autouse=True)
def small_chunks(settings: Any, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.CHUNK_TARGET_TOKENS = 20
    settings.CHUNK_MAX_TOKENS = 40


@dataclass
class Model:
    """Who may see what, by the rules in plain sets."""

    users: list[Any]
    documents: dict[Any, Any]  # document id -> collection id
    collections: dict[Any, set[str]] = field(default_factory=dict)
    own: dict[Any, set[str] | None] = field(default_factory=dict)
    groups: dict[str, set[Any]] = field(default_factory=dict)  # group name -> user ids
    group_ids: dict[str, int] = field(default_factory=dict)
    sees_all: set[Any] = field(default_factory=set)

    def keys_of(self, user: Any) -> set[str]:
        groups = {f"group:{self.group_ids[g]}" for g, members in self.groups.items() if user.pk in members}
        return {"everyone", f"user:{user.pk}"} | groups

    def visible(self, user: Any) -> set[Any]:
        if user.pk in self.sees_all:
            return set(self.documents)
        keys = self.keys_of(user)
        allowed = set()
        for document, collection_id in self.documents.items():
            own = self.own[document]
            if keys & (own if own is not None else self.collections[collection_id]):
                allowed.add(document)
        return allowed

    def key(self, principal: tuple[str, int]) -> str | None:
        """A drawn principal as a key, or None for a group that does not exist now."""
        kind, index = principal
        if kind == "everyone":
            return "everyone"
        if kind == "user":
            return f"user:{self.users[index % len(self.users)].pk}"
        name = GROUP_NAMES[index % len(GROUP_NAMES)]
        return f"group:{self.group_ids[name]}" if name in self.groups else None


principal = st.tuples(st.sampled_from(["everyone", "user", "group", "group"]), st.integers(0, 5))
principals = st.lists(principal, max_size=3)
step = st.one_of(
    st.tuples(st.just("group_create"), st.sampled_from(GROUP_NAMES)),
    st.tuples(st.just("group_delete"), st.sampled_from(GROUP_NAMES)),
    st.tuples(st.just("member_add"), st.sampled_from(GROUP_NAMES), st.integers(0, 5)),
    st.tuples(st.just("member_remove"), st.sampled_from(GROUP_NAMES), st.integers(0, 5)),
    st.tuples(st.just("collection_set"), st.integers(0, 1), principals),
    st.tuples(st.just("documents_set"), st.lists(st.integers(0, 5), min_size=1, max_size=3), principals),
    st.tuples(st.just("documents_inherit"), st.lists(st.integers(0, 5), min_size=1, max_size=3)),
)


def test_every_user_finds_and_lists_exactly_what_the_model_allows_after_every_step():
    admin = member("admin", admin=True)
    tenant = tenant_of(admin)
    users = [admin, member("ann"), member("bob")]
    auditor = member("auditor")
    auditor.user_permissions.add(Permission.objects.get(codename="view_all_documents"))
    users.append(auditor)
    outsider = member("outsider", "globex", admin=True)
    indexed(outsider, "foreign")  # another workspace's document: never seen by anyone here
    collections = [collection(tenant, "Manuals"), collection(tenant, "Contracts")]
    documents = [
        indexed(users[i % 3], f"doc{i}", collections[i % 2])  # creators: admin, ann, bob
        for i in range(6)
    ]
    operator = viewer(admin)

    def edges_show(user: Any) -> set[str]:
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get(user=user).key}")
        listed = api.get("/api/documents/", {"page_size": 100}).json()
        shown = {d["document_id"] for d in listed["results"]}
        assert listed["count"] == len(shown)
        api.credentials(HTTP_AUTHORIZATION=f"Bearer {Token.objects.get(user=user).key}")
        for c in collections:
            body = {"query": QUERY, "max_num_results": 50}
            hits = api.post(f"/v1/vector_stores/vs_{c.pk.hex}/search", body, format="json").json()["data"]
            found = {str(file_ids[h["file_id"]]) for h in hits}
            assert found == {d for d in shown if document_collection[d] == c.pk}, (user.username, c.name)
        return shown

    file_ids = {d.file_id: d.pk for d in documents}
    document_collection = {str(d.pk): d.collection_id for d in documents}

    @settings(
        max_examples=15,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(steps=st.lists(step, min_size=1, max_size=5))
    def run(steps: list[tuple[Any, ...]]) -> None:
        # Every example starts where the migration leaves a workspace: everyone sees everything.
        for group in WorkspaceGroup.objects.filter(tenant=tenant):
            group_delete(viewer=operator, group=group)
        for c in collections:
            collection_access_set(viewer=operator, collection=c, principals=["everyone"], user=admin)
        documents_access_set(viewer=operator, documents=documents, inherit=True, principals=None, user=admin)
        model = Model(
            users=users,
            documents={d.pk: d.collection_id for d in documents},
            collections={c.pk: {"everyone"} for c in collections},
            own={d.pk: None for d in documents},
            sees_all={auditor.pk},
        )
        for drawn in steps:
            apply(drawn, model)
            for user in users:
                same_everywhere(user, model.visible(user))
        # The same answers at the edges, after the last step: /api's list and /v1's search.
        for user in users:
            assert edges_show(user) == {str(d) for d in model.visible(user)}, user.username

    def apply(drawn: tuple[Any, ...], model: Model) -> None:
        kind = drawn[0]
        if kind == "group_create" and drawn[1] not in model.groups:
            made = group_create(viewer=operator, tenant=tenant, name=drawn[1])
            model.groups[drawn[1]], model.group_ids[drawn[1]] = set(), made.pk
        elif kind == "group_delete" and drawn[1] in model.groups:
            group_delete(viewer=operator, group=WorkspaceGroup.objects.get(pk=model.group_ids[drawn[1]]))
            gone = f"group:{model.group_ids.pop(drawn[1])}"
            del model.groups[drawn[1]]
            model.collections = {c: keys - {gone} for c, keys in model.collections.items()}
            model.own = {d: (keys - {gone} if keys is not None else None) for d, keys in model.own.items()}
        elif kind in ("member_add", "member_remove") and drawn[1] in model.groups:
            group = WorkspaceGroup.objects.get(pk=model.group_ids[drawn[1]])
            user = users[drawn[2] % len(users)]
            if kind == "member_add":
                group_member_add(viewer=operator, group=group, user_id=user.pk)
                model.groups[drawn[1]].add(user.pk)
            else:
                group_member_remove(viewer=operator, group=group, user_id=user.pk)
                model.groups[drawn[1]].discard(user.pk)
        elif kind == "collection_set":
            keys = {k for k in map(model.key, drawn[2]) if k is not None}
            chosen = collections[drawn[1]]
            collection_access_set(viewer=operator, collection=chosen, principals=sorted(keys), user=admin)
            model.collections[chosen.pk] = keys
        elif kind == "documents_set":
            keys = {k for k in map(model.key, drawn[2]) if k is not None}
            chosen = [documents[i % len(documents)] for i in dict.fromkeys(drawn[1])]
            documents_access_set(
                viewer=operator, documents=chosen, inherit=False, principals=sorted(keys), user=admin
            )
            model.own.update({d.pk: keys for d in chosen})
        elif kind == "documents_inherit":
            chosen = [documents[i % len(documents)] for i in dict.fromkeys(drawn[1])]
            documents_access_set(viewer=operator, documents=chosen, inherit=True, principals=None, user=admin)
            model.own.update({d.pk: None for d in chosen})

    run()
    # The grants of the last example are exactly its lists in force (the table search reads).
    for document in Document.objects.filter(tenant=tenant):
        own = document.access
        expected = own if own is not None else Collection.objects.get(pk=document.collection_id).access
        assert sorted(
            DocumentGrant.objects.filter(document=document).values_list("principal", flat=True)
        ) == sorted(expected)
