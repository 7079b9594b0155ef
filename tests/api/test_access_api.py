"""Access lists through /api and /v1: a document the caller may not see answers exactly what a
missing one answers on every route, is in no list, count or search; lists and groups are set
through the API with clear refusals that change nothing."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from documents.models import AccessChange, Document, DocumentGrant
from documents.services.groups import membership_set_admin
from jobs.models import Status
from tests.api.conftest import TEXT, Caller, assert_error, drive

pytestmark = pytest.mark.django_db

MODES = ("hybrid", "lexical", "semantic")


def make_admin(caller: Caller) -> None:
    user = get_user_model().objects.get(username=caller.username)
    membership_set_admin(membership=user.memberships.get(), is_admin=True)


def user_id(caller: Caller) -> int:
    return int(get_user_model().objects.get(username=caller.username).pk)


def ready(caller: Caller, data: bytes, name: str, **form: Any) -> dict[str, Any]:
    body = {"file": _file(name, data), **form}
    answer = caller.client.post("/api/documents/", body, format="multipart")
    assert answer.status_code == 201, answer.content
    assert drive(answer.json()["job_id"]).status == Status.READY
    return dict(answer.json())


def _file(name: str, data: bytes) -> Any:
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data)


def bearer(caller: Caller) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {caller.token}")
    return client


def search_ids(caller: Caller, mode: str) -> set[str]:
    answer = caller.client.get("/api/search", {"q": "harbor tide", "k": "50", "mode": mode})
    assert answer.status_code == 200, answer.content
    return {hit["document_id"] for hit in answer.json()["results"]}


def listed_ids(caller: Caller) -> tuple[set[str], int]:
    body = caller.client.get("/api/documents/").json()
    return {d["document_id"] for d in body["results"]}, body["count"]


@pytest.fixture
def acme(make_caller: Any) -> dict[str, Any]:
    alice, bob = make_caller("alice", "acme"), make_caller("bob", "acme")
    make_admin(alice)
    public = ready(alice, TEXT, "public.txt")
    secret = ready(alice, TEXT + b"Salaries by the tide.\n", "secret.txt", access=f"user:{user_id(alice)}")
    return {"alice": alice, "bob": bob, "public": public, "secret": secret}


def routes(document_id: str, job_id: str) -> list[tuple[str, str, Any]]:
    base = f"/api/documents/{document_id}"
    return [
        ("get", f"{base}/", None),
        ("get", f"{base}/access", None),
        ("put", f"{base}/access", {"inherit": True}),
        ("patch", f"{base}/", {"title": "Mine"}),
        ("get", f"{base}/versions/1/chunks", None),
        ("get", f"{base}/versions/1/text", None),
        ("post", f"{base}/versions/1/process-again", None),
        ("get", f"{base}/jobs/{job_id}", None),
        ("post", f"{base}/jobs/{job_id}/retry", None),
        ("delete", f"{base}/versions/1", None),
        ("delete", f"{base}/", None),
    ]


def test_an_invisible_document_answers_like_a_missing_one_on_every_api_route(acme: dict[str, Any]):
    bob, secret = acme["bob"], acme["secret"]
    missing_doc, missing_job = str(uuid.uuid4()), str(uuid.uuid4())
    for (method, url, body), (_, missing_url, _) in zip(
        routes(secret["document_id"], secret["job_id"]), routes(missing_doc, missing_job), strict=True
    ):
        seen = getattr(bob.client, method)(url, body, format="json")
        missing = getattr(bob.client, method)(missing_url, body, format="json")
        assert (seen.status_code, seen.content) == (missing.status_code, missing.content), url
        assert seen.status_code == 404, url
    verdicts = [
        bob.client.post(
            "/api/label-candidates", {"query": "tide", "document_id": d, "verdict": "relevant"}, format="json"
        )
        for d in (secret["document_id"], missing_doc)
    ]
    assert verdicts[0].status_code == verdicts[1].status_code == 404
    assert verdicts[0].content == verdicts[1].content
    assert Document.objects.filter(pk=secret["document_id"], deleted_at=None).exists()


def test_lists_counts_and_every_search_mode_hold_only_what_the_caller_may_see(acme: dict[str, Any]):
    alice, bob, public, secret = acme["alice"], acme["bob"], acme["public"], acme["secret"]
    both = {public["document_id"], secret["document_id"]}
    assert listed_ids(bob) == ({public["document_id"]}, 1)
    assert listed_ids(alice) == (both, 2)
    for mode in MODES:
        assert search_ids(bob, mode) == {public["document_id"]}, mode
        assert search_ids(alice, mode) == both, mode
    [default] = bob.client.get("/api/collections").json()
    assert default["document_counts"]["total"] == 1
    assert alice.client.get("/api/collections").json()[0]["document_counts"]["total"] == 2

    # Alice lets Bob in: the next request of his sees it everywhere.
    answer = alice.client.put(
        f"/api/documents/{secret['document_id']}/access",
        {"inherit": False, "principals": [f"user:{user_id(alice)}", f"user:{user_id(bob)}"]},
        format="json",
    )
    assert answer.status_code == 200, answer.content
    assert listed_ids(bob) == (both, 2)
    for mode in MODES:
        assert search_ids(bob, mode) == both, mode
    assert bob.client.get(f"/api/documents/{secret['document_id']}/").status_code == 200


def test_v1_files_stores_and_search_hold_only_what_the_token_user_may_see(acme: dict[str, Any]):
    bob, public, secret = acme["bob"], acme["public"], acme["secret"]
    client = bearer(bob)
    hidden = Document.objects.get(pk=secret["document_id"])
    store = f"vs_{hidden.collection_id.hex}"
    missing_file = "file-" + uuid.uuid4().hex

    for url in (
        "/v1/files/{}",
        f"/v1/vector_stores/{store}/files/{{}}",
        f"/v1/vector_stores/{store}/files/{{}}/content",
    ):
        seen = client.get(url.format(hidden.file_id))
        missing = client.get(url.format(missing_file))
        assert seen.status_code == missing.status_code == 404, url
        assert json.loads(seen.content.decode().replace(hidden.file_id, missing_file)) == missing.json()

    files = client.get(f"/v1/vector_stores/{store}/files").json()["data"]
    assert [f["document_id"] for f in files] == [public["document_id"]]
    assert client.get(f"/v1/vector_stores/{store}").json()["file_counts"]["total"] == 1
    hits = client.post(f"/v1/vector_stores/{store}/search", {"query": "harbor tide"}, format="json").json()[
        "data"
    ]
    public_file = Document.objects.get(pk=public["document_id"]).file_id
    assert {h["file_id"] for h in hits} == {public_file}
    owner_hits = bearer(acme["alice"]).post(
        f"/v1/vector_stores/{store}/search", {"query": "harbor tide"}, format="json"
    )
    assert {h["file_id"] for h in owner_hits.json()["data"]} == {public_file, hidden.file_id}


def test_refused_access_changes_say_why_and_change_nothing(acme: dict[str, Any], make_caller: Any):
    alice, bob, public = acme["alice"], acme["bob"], acme["public"]
    mallory = make_caller("mallory", "globex")
    make_admin(mallory)
    theirs = mallory.client.post("/api/groups", {"name": "Theirs"}, format="json").json()
    url = f"/api/documents/{public['document_id']}/access"
    grants = sorted(DocumentGrant.objects.values_list("document_id", "principal"))

    assert_error(
        alice.client.put(url, {"principals": [theirs["key"]]}, format="json"), 400, "unknown_principal"
    )
    assert_error(
        alice.client.put(url, {"principals": ["user:999999"]}, format="json"), 400, "unknown_principal"
    )
    assert_error(alice.client.put(url, {"principals": ["staff"]}, format="json"), 400, "invalid_principal")
    assert_error(alice.client.put(url, {}, format="json"), 400, "invalid")  # never "nobody" by omission
    assert_error(
        alice.client.put(url, {"inherit": True, "principals": ["everyone"]}, format="json"),
        400,
        "invalid_principals",
    )
    # Bob sees the document but neither made it nor administers the workspace.
    assert_error(bob.client.put(url, {"principals": ["everyone"]}, format="json"), 403, "not_allowed")
    collection = Document.objects.get(pk=public["document_id"]).collection_id
    collection_url = f"/api/collections/{collection}/access"
    assert_error(bob.client.put(collection_url, {"principals": []}, format="json"), 403, "not_allowed")
    assert_error(
        alice.client.put(collection_url, {"principals": [theirs["key"]]}, format="json"),
        400,
        "unknown_principal",
    )
    # Deleting the collection would delete a document Bob cannot see: only an admin may.
    assert_error(bob.client.delete(f"/api/collections/{collection}"), 403, "not_allowed")
    assert bearer(bob).delete(f"/v1/vector_stores/vs_{collection.hex}").status_code == 403
    # An upload with an unknown principal stores nothing.
    count = Document.objects.count()
    refused = alice.client.post(
        "/api/documents/", {"file": _file("x.txt", TEXT), "access": "group:424242"}, format="multipart"
    )
    assert_error(refused, 400, "unknown_principal")
    assert Document.objects.count() == count
    assert sorted(DocumentGrant.objects.values_list("document_id", "principal")) == grants
    assert not AccessChange.objects.exists()
    assert alice.client.get(url).json() == {"inherit": True, "principals": ["everyone"]}
    assert alice.client.get(collection_url).json() == {"inherit": False, "principals": ["everyone"]}


def test_groups_are_managed_by_admins_and_grant_what_their_lists_say(acme: dict[str, Any]):
    alice, bob, secret = acme["alice"], acme["bob"], acme["secret"]
    assert_error(bob.client.post("/api/groups", {"name": "Mine"}, format="json"), 403, "not_allowed")
    made = alice.client.post("/api/groups", {"name": "Finance"}, format="json")
    assert made.status_code == 201, made.content
    group = made.json()
    assert_error(alice.client.post("/api/groups", {"name": "Finance"}, format="json"), 409, "name_taken")
    renamed = alice.client.patch(f"/api/groups/{group['id']}", {"name": "Money"}, format="json")
    assert renamed.json()["name"] == "Money"
    collection = Document.objects.get(pk=secret["document_id"]).collection_id
    answer = alice.client.put(
        f"/api/collections/{collection}/access", {"principals": [group["key"]]}, format="json"
    )
    assert answer.status_code == 200, answer.content
    # Bulk: both documents inherit the collection's list (the group's).
    ids = [acme["public"]["document_id"], secret["document_id"]]
    bulk = alice.client.put("/api/access/documents", {"document_ids": ids, "inherit": True}, format="json")
    assert bulk.status_code == 200, bulk.content
    assert listed_ids(bob) == (set(), 0)
    added = alice.client.post(f"/api/groups/{group['id']}/members", {"user_id": user_id(bob)}, format="json")
    assert [m["username"] for m in added.json()["members"]] == ["bob"]
    assert listed_ids(bob) == (set(ids), 2)
    assert search_ids(bob, "hybrid") == set(ids)
    assert bob.client.get("/api/groups").json()[0]["name"] == "Money"  # members see the groups
    removed = alice.client.delete(f"/api/groups/{group['id']}/members/{user_id(bob)}")
    assert removed.json()["members"] == []
    assert listed_ids(bob) == (set(), 0)
    assert alice.client.delete(f"/api/groups/{group['id']}").status_code == 204
    assert alice.client.get(f"/api/collections/{collection}/access").json()["principals"] == []


def test_a_v1_attachment_carries_its_own_access_list(acme: dict[str, Any]):
    alice, bob = acme["alice"], acme["bob"]
    client = bearer(alice)
    store = client.post("/v1/vector_stores", {"name": "Private"}, format="json").json()["id"]
    uploaded = client.post(
        "/v1/files", {"file": _file("plan.txt", TEXT), "purpose": "assistants"}, format="multipart"
    )
    file_id = uploaded.json()["id"]
    refused = client.post(
        f"/v1/vector_stores/{store}/files", {"file_id": file_id, "access": ["group:9999"]}, format="json"
    )
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "access"
    assert client.get(f"/v1/vector_stores/{store}/files").json()["data"] == []
    body = {"file_id": file_id, "access": [f"user:{user_id(alice)}"]}
    attached = client.post(f"/v1/vector_stores/{store}/files", body, format="json")
    assert attached.status_code == 200, attached.content
    version = Document.objects.get(pk=attached.json()["document_id"]).latest_version
    assert version is not None
    assert drive(version.job_id).status == Status.READY
    assert [f["id"] for f in client.get(f"/v1/vector_stores/{store}/files").json()["data"]] == [file_id]
    assert bearer(bob).get(f"/v1/vector_stores/{store}/files").json()["data"] == []
    assert bearer(bob).get(f"/v1/vector_stores/{store}/files/{file_id}").status_code == 404


def test_a_batch_carries_one_access_list_for_its_documents(acme: dict[str, Any]):
    alice, bob = acme["alice"], acme["bob"]
    files = [_file("one.txt", TEXT + b"One."), _file("two.txt", TEXT + b"Two.")]
    refused = alice.client.post("/api/batches", {"files": files, "access": "group:31337"}, format="multipart")
    assert_error(refused, 400, "unknown_principal")
    files = [_file("one.txt", TEXT + b"One."), _file("two.txt", TEXT + b"Two.")]
    made = alice.client.post(
        "/api/batches", {"files": files, "access": f"user:{user_id(alice)}"}, format="multipart"
    )
    assert made.status_code == 201, made.content
    ids = {d["document_id"] for d in made.json()["documents"]}
    assert len(ids) == 2
    assert not ids & listed_ids(bob)[0]
    assert ids <= listed_ids(alice)[0]


def test_the_status_poll_sees_through_a_group_or_the_view_all_permission_in_its_one_query(
    acme: dict[str, Any], django_assert_num_queries: Any
) -> None:
    """The status endpoint checks access inside its version query (the caller's groups and
    permissions read there): a group on the list, or view_all_documents given through a Django
    group, lets bob in; without them it is the 404 of a missing id."""
    from django.contrib.auth.models import Group, Permission

    alice, bob, secret = acme["alice"], acme["bob"], acme["secret"]
    status = secret["status_url"]
    assert_error(bob.client.get(status), 404, "not_found")
    made = alice.client.post("/api/groups", {"name": "Payroll"}, format="json")
    assert made.status_code == 201, made.content
    group = made.json()
    put = alice.client.put(
        f"/api/documents/{secret['document_id']}/access",
        {"inherit": False, "principals": [f"user:{user_id(alice)}", group["key"]]},
        format="json",
    )
    assert put.status_code == 200, put.content
    assert_error(bob.client.get(status), 404, "not_found")  # not a member yet
    added = alice.client.post(f"/api/groups/{group['id']}/members", {"user_id": user_id(bob)}, format="json")
    assert added.status_code in (200, 201), added.content
    with django_assert_num_queries(2):  # the token, then the version with its access check
        assert bob.client.get(status).status_code == 200
    # Out of the group again; then view_all_documents through a plain Django group.
    removed = alice.client.delete(f"/api/groups/{group['id']}/members/{user_id(bob)}")
    assert removed.status_code in (200, 204), removed.content
    assert_error(bob.client.get(status), 404, "not_found")
    auditors = Group.objects.create(name="auditors")
    auditors.permissions.add(Permission.objects.get(codename="view_all_documents"))
    get_user_model().objects.get(username=bob.username).groups.add(auditors)
    assert bob.client.get(status).status_code == 200
