"""Access lists through the services: who finds what in every search mode and list, changes
that take effect in their commit without writing a chunk or a vector, refused input that
changes nothing, and the audit of every change."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.db import connection

from documents.models import AccessChange, Chunk, ChunkVector, Collection, Document, DocumentGrant, IndexEntry
from documents.search import MODES, search
from documents.services.access import (
    AccessInputError,
    collection_access_set,
    document_access_set,
    documents_access_set,
)
from documents.services.groups import group_create, group_delete, group_member_add, group_member_remove
from documents.services.upload import document_upload
from jobs.models import Status
from tests.documents.access_helpers import (
    QUERY,
    collection,
    indexed,
    member,
    same_everywhere,
    seen_everywhere,
    tenant_of,
    viewer,
)
from tests.documents.helpers import run_until_idle

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def small_chunks(settings, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.CHUNK_TARGET_TOKENS = 20
    settings.CHUNK_MAX_TOKENS = 40


def test_a_restricted_document_is_found_only_by_its_group_in_every_mode_and_list():
    admin, ann, bob = member("admin", admin=True), member("ann"), member("bob")
    public = indexed(admin, "harbour")
    hr = indexed(admin, "salaries")
    hr_group = group_create(viewer=viewer(admin), tenant=tenant_of(admin), name="HR")
    document_access_set(
        viewer=viewer(admin), document=hr, inherit=False, principals=[hr_group.key], user=admin
    )
    same_everywhere(ann, {public.pk})
    same_everywhere(bob, {public.pk})

    group_member_add(viewer=viewer(admin), group=hr_group, user_id=ann.pk)
    same_everywhere(ann, {public.pk, hr.pk})  # the next read, without rewriting any grant
    same_everywhere(bob, {public.pk})

    group_member_remove(viewer=viewer(admin), group=hr_group, user_id=ann.pk)
    same_everywhere(ann, {public.pk})


def test_a_user_key_and_the_view_all_permission_see_a_restricted_document():
    admin, ann, auditor = member("admin", admin=True), member("ann"), member("auditor")
    secret = indexed(admin, "merger", access=[f"user:{ann.pk}"])
    same_everywhere(ann, {secret.pk})
    same_everywhere(admin, set())  # an admin changes lists; seeing needs a grant like anyone
    same_everywhere(auditor, set())
    auditor.user_permissions.add(Permission.objects.get(codename="view_all_documents"))
    same_everywhere(auditor, {secret.pk})


def seen_from_another_connection(user: object) -> dict[str, set[object]]:
    """What ``user`` sees, read on a fresh connection of another thread: only committed rows."""
    answer: dict[str, set[object]] = {}

    def read() -> None:
        try:
            answer.update(seen_everywhere(user))
        finally:
            connection.close()

    thread = threading.Thread(target=read)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive()
    return answer


@pytest.mark.django_db(transaction=True)
def test_a_collection_change_takes_effect_in_its_commit_and_writes_no_chunk_or_vector():
    admin, ann = member("admin", admin=True), member("ann")
    contracts = collection(tenant_of(admin), "Contracts")
    inheriting = [indexed(admin, f"contract{i}", contracts) for i in range(3)]
    own = indexed(admin, "memo", contracts, access=["everyone"])
    same_everywhere(ann, {d.pk for d in inheriting} | {own.pk})
    counted = (Chunk, ChunkVector, IndexEntry)
    before = {model: model.objects.count() for model in counted}
    legal = group_create(viewer=viewer(admin), tenant=tenant_of(admin), name="Legal")

    collection_access_set(viewer=viewer(admin), collection=contracts, principals=[legal.key], user=admin)

    # Committed when the call returns: another connection's search right after it sees it.
    assert seen_from_another_connection(ann) == {name: {own.pk} for name in seen_everywhere(ann)}
    same_everywhere(ann, {own.pk})  # the document with its own list keeps it
    assert {model: model.objects.count() for model in counted} == before
    # One grant row set per inheriting document; nothing else written.
    assert set(DocumentGrant.objects.filter(principal=legal.key).values_list("document_id", flat=True)) == {
        d.pk for d in inheriting
    }
    group_member_add(viewer=viewer(admin), group=legal, user_id=ann.pk)
    same_everywhere(ann, {d.pk for d in inheriting} | {own.pk})


def test_a_document_back_to_inherit_follows_its_collection_again():
    admin, ann = member("admin", admin=True), member("ann")
    doc = indexed(admin, "policy", access=[f"user:{admin.pk}"])
    same_everywhere(ann, set())
    document_access_set(viewer=viewer(admin), document=doc, inherit=True, principals=[], user=admin)
    same_everywhere(ann, {doc.pk})
    doc.refresh_from_db()
    assert doc.access is None


def test_unknown_principals_and_another_workspaces_group_change_nothing():
    admin = member("admin", admin=True)
    outsider = member("outsider", "globex", admin=True)
    theirs = group_create(viewer=viewer(outsider), tenant=tenant_of(outsider), name="Theirs")
    doc = indexed(admin, "plan")
    grants = list(DocumentGrant.objects.order_by("pk").values_list("document_id", "principal"))
    bad_lists = [
        [theirs.key],
        [f"user:{outsider.pk}"],
        ["user:999999"],
        ["group:0"],
        ["admins"],
        [7],
        "everyone",
    ]
    for principals in bad_lists:
        with pytest.raises(AccessInputError) as refused:
            document_access_set(
                viewer=viewer(admin), document=doc, inherit=False, principals=principals, user=admin
            )
        assert refused.value.status == 400
        with pytest.raises(AccessInputError):
            collection_access_set(
                viewer=viewer(admin), collection=doc.collection, principals=principals, user=admin
            )
    assert list(DocumentGrant.objects.order_by("pk").values_list("document_id", "principal")) == grants
    assert Document.objects.get(pk=doc.pk).access is None
    assert Collection.objects.get(pk=doc.collection_id).access == ["everyone"]
    assert not AccessChange.objects.exists()


def test_only_the_creator_or_an_admin_changes_a_documents_access():
    admin, ann, bob = member("admin", admin=True), member("ann"), member("bob")
    anns = indexed(ann, "draft")
    with pytest.raises(AccessInputError) as refused:
        document_access_set(
            viewer=viewer(bob), document=anns, inherit=False, principals=["everyone"], user=bob
        )
    assert refused.value.status == 403
    with pytest.raises(AccessInputError):
        collection_access_set(viewer=viewer(ann), collection=anns.collection, principals=[], user=ann)
    with pytest.raises(AccessInputError):
        group_create(viewer=viewer(ann), tenant=tenant_of(ann), name="Mine")
    document_access_set(
        viewer=viewer(ann), document=anns, inherit=False, principals=[f"user:{ann.pk}"], user=ann
    )
    same_everywhere(bob, set())
    document_access_set(viewer=viewer(admin), document=anns, inherit=True, principals=None, user=admin)
    same_everywhere(bob, {anns.pk})


def test_bulk_set_is_all_or_nothing():
    admin, ann = member("admin", admin=True), member("ann")
    mine = indexed(admin, "alpha")
    anns = indexed(ann, "beta")
    with pytest.raises(AccessInputError):
        documents_access_set(
            viewer=viewer(ann), documents=[anns, mine], inherit=False, principals=[f"user:{ann.pk}"], user=ann
        )
    same_everywhere(admin, {mine.pk, anns.pk})
    documents_access_set(
        viewer=viewer(admin), documents=[anns, mine], inherit=False, principals=[f"user:{ann.pk}"], user=admin
    )
    same_everywhere(admin, set())
    same_everywhere(ann, {mine.pk, anns.pk})


def test_every_change_is_audited_with_who_what_from_and_to():
    admin = member("admin", admin=True)
    doc = indexed(admin, "ledger")
    document_access_set(
        viewer=viewer(admin), document=doc, inherit=False, principals=[f"user:{admin.pk}"], user=admin
    )
    collection_access_set(viewer=viewer(admin), collection=doc.collection, principals=[], user=admin)
    changes = list(AccessChange.objects.order_by("changed_at", "pk"))
    assert [(c.subject_type, c.subject_id, c.changed_by_name, c.before, c.after) for c in changes] == [
        (
            "document",
            str(doc.pk),
            "admin",
            {"inherit": True, "principals": ["everyone"]},
            {"inherit": False, "principals": [f"user:{admin.pk}"]},
        ),
        (
            "collection",
            str(doc.collection_id),
            "admin",
            {"inherit": False, "principals": ["everyone"]},
            {"inherit": False, "principals": []},
        ),
    ]


def test_a_deleted_group_leaves_every_list_and_grant():
    admin, ann = member("admin", admin=True), member("ann")
    team = group_create(viewer=viewer(admin), tenant=tenant_of(admin), name="Team")
    group_member_add(viewer=viewer(admin), group=team, user_id=ann.pk)
    doc = indexed(admin, "roadmap", access=[team.key, f"user:{admin.pk}"])
    collection_access_set(viewer=viewer(admin), collection=doc.collection, principals=[team.key], user=admin)
    same_everywhere(ann, {doc.pk})
    group_delete(viewer=viewer(admin), group=team)
    same_everywhere(ann, set())
    assert Document.objects.get(pk=doc.pk).access == [f"user:{admin.pk}"]
    assert Collection.objects.get(pk=doc.collection_id).access == []
    assert not DocumentGrant.objects.filter(principal=team.key).exists()


def test_the_filter_runs_before_the_top_k_in_every_mode(monkeypatch: pytest.MonkeyPatch):
    """Documents the caller may not see match the query far better than the one they may: a
    filter applied after the top k would leave nothing; inside the query it finds that one.
    The rankings by meaning are pushed off their exact shortcut for small scopes, so pgvector
    ranks by its graph probe and binary codes, as at scale."""
    from documents import search as search_module
    from documents.retrieval import pgvector

    if os.environ.get("REQUIRE_PGVECTOR") == "1":  # set by the pgvector tests' child runs
        assert pgvector.enabled(connection)
    monkeypatch.setattr(pgvector, "EXACT_BELOW", 0)
    monkeypatch.setattr(search_module, "DENSE_CANDIDATES", 1)
    admin, ann = member("admin", admin=True), member("ann")
    for i in range(8):
        indexed(admin, f"zephyr{i}", access=[f"user:{admin.pk}"])
    weak = document_upload_weak(admin)
    tenant = tenant_of(ann)
    for mode in MODES:
        hits = search(tenant, QUERY, 1, mode=mode, viewer=viewer(ann))
        assert [h.document_id for h in hits] == [weak.pk], mode
        assert search(tenant, QUERY, 1, mode=mode, viewer=viewer(admin))[0].document_id != weak.pk, mode


def document_upload_weak(user: Any) -> Document:
    """A document open to everyone that mentions the query word once among many others."""
    text = f"Minutes of the meeting: budget, parking, lunch menu, holidays and the {QUERY} question.\n"
    result = document_upload(tenant=tenant_of(user), data=text.encode(), filename="minutes.txt", user=user)
    assert result.job is not None
    assert run_until_idle(result.job.pk).status == Status.READY
    return Document.objects.get(pk=result.document.pk)
