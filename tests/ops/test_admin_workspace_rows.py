"""The admin's audit and operator pages beyond documents (access changes, deletions, webhook
endpoints and messages, evaluation sets, their queries, label candidates and runs) show staff
without documents.view_all_documents only their own workspace's rows, and of those that name a
document only the ones whose document they may see; another row's page answers as an id that
does not exist. Staff with the permission, and superusers, see every row."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from documents.evaluation.models import EvaluationResult, LabelCandidate, LabelledQuery, LabelledQuerySet
from documents.models import AccessChange, Deletion, Document, Tenant, WebhookMessage
from documents.selectors import viewer_for
from documents.services.access import collection_access_set, document_access_set
from documents.services.collections import default_collection
from documents.services.delete import document_delete
from documents.services.evaluation import (
    candidate_record,
    evaluation_start,
    query_set_create,
    query_set_import,
)
from documents.services.groups import membership_set_admin
from documents.services.webhooks import event_emit, webhook_endpoint_create
from tests.documents.helpers import run_until_idle
from tests.ops.conftest import login, make_staff
from tests.ops.test_admin_document_access import as_missing, document, page, unmasked

pytestmark = pytest.mark.django_db

PERMISSIONS = (
    "view_accesschange",
    "view_deletion",
    "view_webhookendpoint",
    "view_webhookmessage",
    "view_labelledqueryset",
    "change_labelledqueryset",
    "view_labelledquery",
    "view_labelcandidate",
    "view_evaluationrun",
    "view_evaluationresult",
)


def staff(username: str, *, workspace: str | None, view_all: bool = False) -> Client:
    from documents.services.accounts import user_create_in_tenant

    user = make_staff(username, *PERMISSIONS, *(["view_all_documents"] if view_all else []), app="documents")
    if workspace is not None:
        user_create_in_tenant(username=username, tenant_slug=workspace)
    return login(user)


def as_missing_id(client: Client, name: str, real: int) -> None:
    """``as_missing`` for a page whose row has a number for its id."""
    missing = 10**9
    seen = client.get(reverse(name, args=[real]), follow=True)
    unknown = client.get(reverse(name, args=[missing]), follow=True)
    assert seen.status_code == unknown.status_code and seen.redirect_chain == unknown.redirect_chain, name
    assert unmasked(seen.content.decode().replace(f"“{real}”", f"“{missing}”")) == unmasked(
        unknown.content.decode()
    ), name


def url(name: str, *args: Any) -> str:
    return reverse(f"admin:documents_{name}", args=args)


@pytest.fixture
def rows(settings: Any) -> dict[str, Any]:
    """In acme: a document everyone sees and one only alice sees; one document in globex. For
    each page, a row about each of them."""
    settings.WEBHOOK_ALLOW_PRIVATE = True
    from documents.services.accounts import user_create_in_tenant

    user_create_in_tenant(username="alice", tenant_slug="acme")
    user_create_in_tenant(username="gil", tenant_slug="globex")
    alice, gil = User.objects.get(username="alice"), User.objects.get(username="gil")
    acme, globex = Tenant.objects.get(slug="acme"), Tenant.objects.get(slug="globex")
    for user in (alice, gil):
        membership_set_admin(membership=user.memberships.get(), is_admin=True)
    shown, hidden, elsewhere = (
        document("Harbour notes"),
        document("Salaries by the tide"),
        document("Globex plans", tenant="globex"),
    )
    as_alice, as_gil = viewer_for(alice, acme), viewer_for(gil, globex)
    document_access_set(viewer=as_alice, document=shown, inherit=False, principals=["everyone"], user=alice)
    document_access_set(
        viewer=as_alice, document=hidden, inherit=False, principals=[f"user:{alice.pk}"], user=alice
    )
    collection_access_set(
        viewer=as_gil, collection=default_collection(globex), principals=[f"user:{gil.pk}"], user=gil
    )

    # Deletions (their cleanup pending: the documents are still there, deleted).
    gone_shown, gone_hidden = (
        document("Old harbour notes"),
        document("Old salaries", access=[f"user:{alice.pk}"]),
    )
    gone_elsewhere = document("Old globex plans", tenant="globex")
    for doc in (gone_shown, gone_hidden, gone_elsewhere):
        assert document_delete(tenant=Tenant.objects.get(pk=doc.tenant_id), document_id=doc.pk, user=None)

    # Webhook messages to workspace-wide endpoints (no owner: told every event).
    endpoints = {
        slug: webhook_endpoint_create(tenant=t, url=f"http://127.0.0.1:9/{slug}", events=["document.ready"])
        for slug, t in (("acme", acme), ("globex", globex))
    }
    messages = {}
    for name, doc in (("shown", shown), ("hidden", hidden), ("elsewhere", elsewhere)):
        tenant = Tenant.objects.get(pk=doc.tenant_id)
        [messages[name]] = event_emit(
            tenant=tenant, event_type="document.ready", data={"document_id": str(doc.pk)}, document_id=doc.pk
        )

    # Evaluation: a set in each workspace, a query labelled with each document, candidates, runs.
    sets = {}
    for slug, tenant, labelled in (("acme", acme, (shown, hidden)), ("globex", globex, (elsewhere,))):
        sets[slug] = query_set_create(collection=default_collection(tenant), name=f"{slug} questions")
        lines = [{"query": f"about {doc.title}", "relevant": [str(doc.pk)]} for doc in labelled]
        query_set_import(query_set=sets[slug], data="\n".join(json.dumps(x) for x in lines).encode())
    candidates = {
        name: candidate_record(
            tenant=Tenant.objects.get(pk=doc.tenant_id),
            query=f"asked of {doc.title}",
            document_id=doc.pk,
            verdict="relevant",
        )
        for name, doc in (("shown", shown), ("hidden", hidden), ("elsewhere", elsewhere))
    }
    runs = {}
    for slug, query_set in sets.items():
        runs[slug] = evaluation_start(query_set=query_set)
        assert runs[slug].job_id is not None
        run_until_idle(runs[slug].job_id)
    return {
        "documents": {"shown": shown, "hidden": hidden, "elsewhere": elsewhere},
        "deletions": {
            name: Deletion.objects.get(document_id=doc.pk)
            for name, doc in (("shown", gone_shown), ("hidden", gone_hidden), ("elsewhere", gone_elsewhere))
        },
        "endpoints": endpoints,
        "messages": messages,
        "sets": sets,
        "candidates": candidates,
        "runs": runs,
    }


def test_staff_see_only_their_workspace_rows_about_documents_they_may_see(rows):
    carol = staff("carol", workspace="acme")
    docs = rows["documents"]

    changes = page(carol, url("accesschange_changelist"))[2]
    assert "Harbour notes" in changes
    assert "Salaries by the tide" not in changes
    hidden_change = AccessChange.objects.get(subject_id=str(docs["hidden"].pk))
    elsewhere_change = AccessChange.objects.get(tenant__slug="globex")
    for change in (hidden_change, elsewhere_change):
        assert url("accesschange_change", change.pk) not in changes
        as_missing_id(carol, "admin:documents_accesschange_change", change.pk)

    deletions = page(carol, url("deletion_changelist"))[2]
    assert str(rows["deletions"]["shown"].document_id) in deletions
    for name in ("hidden", "elsewhere"):
        assert str(rows["deletions"][name].document_id) not in deletions, name
        as_missing_id(carol, "admin:documents_deletion_change", rows["deletions"][name].pk)

    endpoints = page(carol, url("webhookendpoint_changelist"))[2]
    assert "/acme" in endpoints and "/globex" not in endpoints
    messages = page(carol, url("webhookmessage_changelist"))[2]
    assert str(rows["messages"]["shown"].pk) in messages
    for name in ("hidden", "elsewhere"):
        assert str(rows["messages"][name].pk) not in messages, name
        as_missing(carol, "admin:documents_webhookmessage_change", rows["messages"][name].pk)

    sets = page(carol, url("labelledqueryset_changelist"))[2]
    assert "acme questions" in sets and "globex questions" not in sets
    as_missing(carol, "admin:documents_labelledqueryset_change", rows["sets"]["globex"].pk)
    own_set = page(carol, url("labelledqueryset_change", rows["sets"]["acme"].pk))[2]
    assert "about Harbour notes" in own_set and "Salaries" not in own_set
    queries = page(carol, url("labelledquery_changelist"))[2]
    assert "about Harbour notes" in queries and "Salaries" not in queries and "Globex plans" not in queries
    hidden_query = LabelledQuery.objects.get(text="about Salaries by the tide")
    as_missing_id(carol, "admin:documents_labelledquery_change", hidden_query.pk)

    candidates = page(carol, url("labelcandidate_changelist"))[2]
    assert "asked of Harbour notes" in candidates
    assert "Salaries" not in candidates and "Globex plans" not in candidates
    as_missing_id(carol, "admin:documents_labelcandidate_change", rows["candidates"]["hidden"].pk)

    runs = page(carol, url("evaluationrun_changelist"))[2]
    assert str(rows["runs"]["acme"].pk) in runs and str(rows["runs"]["globex"].pk) not in runs
    as_missing(carol, "admin:documents_evaluationrun_change", rows["runs"]["globex"].pk)
    own_run = page(carol, url("evaluationrun_change", rows["runs"]["acme"].pk))[2]
    assert "Salaries" not in own_run
    results = EvaluationResult.objects.filter(run=rows["runs"]["acme"])
    assert results.filter(query_text__contains="Salaries").exists(), "the run has a row to hide"
    assert all(r.query_text in own_run for r in results.exclude(query_text__contains="Salaries"))

    # An action posted with a hidden candidate's id changes nothing.
    carol.post(
        url("labelcandidate_changelist"),
        {"action": "confirm", "_selected_action": [str(rows["candidates"]["hidden"].pk)]},
    )
    assert LabelCandidate.objects.get(pk=rows["candidates"]["hidden"].pk).confirmed_at is None


def test_staff_of_no_workspace_see_none_of_these_rows(rows):
    dave = staff("dave", workspace=None)
    for name in (
        "accesschange",
        "deletion",
        "webhookendpoint",
        "webhookmessage",
        "labelledqueryset",
        "labelledquery",
        "labelcandidate",
        "evaluationrun",
    ):
        status, _, listing = page(dave, url(f"{name}_changelist"))
        assert status == 200 and 'id="result_list"' not in listing, name  # an empty list has no table
    assert "Harbour notes" not in page(dave, url("accesschange_changelist"))[2]
    assert "questions" not in page(dave, url("labelledqueryset_changelist"))[2]


def test_view_all_documents_and_superusers_see_every_workspace_row(rows):
    auditor = staff("ada", workspace=None, view_all=True)
    root = login(User.objects.create_superuser("root", "root@example.com", "pw-root-12345"))
    for client in (auditor, root):
        changes = page(client, url("accesschange_changelist"))[2]
        assert "Salaries by the tide" in changes and "Harbour notes" in changes
        deletions = page(client, url("deletion_changelist"))[2]
        assert all(str(d.document_id) in deletions for d in rows["deletions"].values())
        messages = page(client, url("webhookmessage_changelist"))[2]
        assert all(str(m.pk) in messages for m in rows["messages"].values())
        sets = page(client, url("labelledqueryset_changelist"))[2]
        assert "acme questions" in sets and "globex questions" in sets
        queries = page(client, url("labelledquery_changelist"))[2]
        assert "about Salaries by the tide" in queries and "about Globex plans" in queries
        candidates = page(client, url("labelcandidate_changelist"))[2]
        assert "asked of Salaries by the tide" in candidates and "asked of Globex plans" in candidates
        runs = page(client, url("evaluationrun_changelist"))[2]
        assert all(str(r.pk) in runs for r in rows["runs"].values())
    assert LabelledQuerySet.objects.count() == 2 and WebhookMessage.objects.count() == 3
    assert Document.objects.filter(deleted_at__isnull=False).count() == 3


def test_the_workspace_filter_lists_only_the_workspaces_a_staff_member_may_see(rows):
    """The sidebar's "by workspace" filter names no workspace whose rows the staff member may
    not see (with one workspace left it is not shown at all); with ``view_all_documents`` it
    lists them all."""
    acme, globex = Tenant.objects.get(slug="acme"), Tenant.objects.get(slug="globex")
    carol = staff("carol", workspace="acme")
    auditor = staff("ada", workspace=None, view_all=True)
    pages = ("deletion_changelist", "accesschange_changelist", "webhookendpoint_changelist")
    for name in pages:
        mine = page(carol, url(name))[2]
        assert f"tenant__id__exact={globex.pk}" not in mine, name
        every = page(auditor, url(name))[2]
        assert f"tenant__id__exact={acme.pk}" in every and f"tenant__id__exact={globex.pk}" in every, name
