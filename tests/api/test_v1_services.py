"""The vector-store services under /v1: a static chunking strategy honoured by the chunk stage
(size and overlap), the reaper's expiry sweep, and the refusals of bad settings."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from documents.embedders import configured_embedder
from documents.engines.chunking import embedded_text
from documents.models import Chunk, Collection, Document, Tenant
from documents.search import search
from documents.services import vector_stores as vs
from documents.services.files import file_create
from jobs.models import Status
from jobs.services.reaper import _SWEEPS
from tests.documents.helpers import make_tenant, run_until_idle

pytestmark = pytest.mark.django_db(transaction=True)

WORDS = " ".join(f"word{i:04d}" for i in range(1500))  # one long paragraph of distinct words


def attach_and_run(
    tenant: Tenant, collection: Collection, data: bytes, name: str, **kwargs: Any
) -> list[Chunk]:
    obj = file_create(tenant=tenant, user=None, data=data, filename=name, purpose="assistants")
    attached = vs.file_attach(tenant=tenant, collection=collection, file_id=obj.pk, **kwargs)
    job = run_until_idle(vs.job_of(attached).pk)  # type: ignore[union-attr]
    assert job.status == Status.READY, (job.status, job.error_code)
    return list(Chunk.objects.filter(version=attached.latest_version).order_by("ordinal"))


def model_tokens(chunk: Chunk) -> int:
    """The chunk's size as the chunker measured it: the embedder's tokens of what it embeds."""
    return configured_embedder().count_tokens(embedded_text(chunk.version.document.title, chunk.text))


def test_a_static_chunking_strategy_sets_chunk_size_and_overlap() -> None:
    tenant = make_tenant()
    store = vs.store_create(
        tenant=tenant, name="s", metadata=None, expires_after=None, chunking_strategy=None
    )
    static = {"type": "static", "static": {"max_chunk_size_tokens": 120, "chunk_overlap_tokens": 30}}
    small = attach_and_run(tenant, store, WORDS.encode(), "a.txt", chunking_strategy=static)
    auto = attach_and_run(tenant, store, (WORDS + " ").encode(), "b.txt")

    assert len(small) > len(auto) > 1
    # Sizes are the tenant's embedder's tokens of what it embeds (title and heading path included).
    assert all(model_tokens(c) <= 120 for c in small)
    assert max(model_tokens(c) for c in auto) > 120  # the settings' sizes otherwise
    for before, after in itertools.pairwise(small):
        first_word = after.text.split()[0]
        assert first_word in before.text.split()  # starts inside the previous chunk
        assert after.text.split()[:3] != before.text.split()[:3]
    assert not any(a.text.split()[0] in b.text.split() for b, a in itertools.pairwise(auto))


def test_the_store_settings_chunking_applies_to_its_files() -> None:
    tenant = make_tenant()
    static = {"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0}}
    store = vs.store_create(
        tenant=tenant, name="s", metadata=None, expires_after=None, chunking_strategy=static
    )
    chunks = attach_and_run(tenant, store, WORDS.encode(), "a.txt")
    assert all(model_tokens(c) <= 100 for c in chunks)


def test_an_expired_store_is_deleted_by_the_reaper_sweep() -> None:
    tenant = make_tenant()
    store = vs.store_create(
        tenant=tenant,
        name="s",
        metadata=None,
        expires_after={"anchor": "last_active_at", "days": 1},
        chunking_strategy=None,
    )
    attach_and_run(tenant, store, b"The heron waited in the reeds.", "heron.txt")
    keep = vs.store_create(tenant=tenant, name="k", metadata=None, expires_after=None, chunking_strategy=None)
    assert search(tenant, "heron reeds")
    assert "documents.vector_store_expiry" in _SWEEPS

    assert vs.stores_expire_sweep(10) == []  # not yet
    later = timezone.now() + timedelta(days=1, minutes=1)
    assert vs.stores_expire_sweep(10, now=later) == [vs.store_ref(store)]
    assert not Collection.objects.filter(pk=store.pk).exists()
    assert Collection.objects.filter(pk=keep.pk).exists()
    assert not search(tenant, "heron reeds")
    assert not Document.objects.filter(deleted_at=None, title="heron.txt").exists()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("expires_after", {"anchor": "created_at", "days": 3}),
        ("expires_after", {"anchor": "last_active_at", "days": 0}),
        (
            "chunking_strategy",
            {"type": "static", "static": {"max_chunk_size_tokens": 50, "chunk_overlap_tokens": 0}},
        ),
        (
            "chunking_strategy",
            {"type": "static", "static": {"max_chunk_size_tokens": 200, "chunk_overlap_tokens": 150}},
        ),
        ("chunking_strategy", {"type": "other"}),
    ],
)
def test_bad_store_settings_are_refused_and_nothing_is_stored(field: str, value: object) -> None:
    tenant = make_tenant()
    args = {"expires_after": None, "chunking_strategy": None, field: value}
    with pytest.raises(vs.StoreInputError) as refused:
        vs.store_create(tenant=tenant, name="s", metadata=None, **args)
    assert refused.value.param == field
    assert not Collection.objects.filter(tenant=tenant).exists()


def test_polling_a_file_costs_no_more_queries_than_the_status_endpoint(
    django_assert_max_num_queries: Any,
) -> None:
    from rest_framework.test import APIClient

    from documents.services.accounts import user_create_in_tenant

    token = user_create_in_tenant(username="alice", tenant_slug="acme")
    tenant = Tenant.objects.get(slug="acme")
    store = vs.store_create(
        tenant=tenant, name="s", metadata=None, expires_after=None, chunking_strategy=None
    )
    obj = file_create(
        tenant=tenant, user=None, data=b"The heron waited.", filename="h.txt", purpose="assistants"
    )
    attached = vs.file_attach(tenant=tenant, collection=store, file_id=obj.pk)
    job = vs.job_of(attached)
    assert job is not None
    client = APIClient()
    status_url = f"/api/documents/{attached.pk}/jobs/{job.pk}"
    poll_url = f"/v1/vector_stores/{vs.store_ref(store)}/files/{obj.pk}"

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    with CaptureQueriesContext(connection) as status_queries:
        assert client.get(status_url).status_code == 200
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    with django_assert_max_num_queries(len(status_queries.captured_queries)):
        answer = client.get(poll_url)
    assert answer.status_code == 200
    assert answer.json()["status"] == "in_progress"
    assert answer["openai-poll-after-ms"] == "500"


def test_vector_store_refusals_have_the_openai_shape_and_name_the_parameter() -> None:
    from rest_framework.test import APIClient

    from documents.services.accounts import user_create_in_tenant

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {user_create_in_tenant(username='a', tenant_slug='acme')}")

    def refused(method: str, url: str, body: Any, status: int, code: str, param: str | None) -> None:
        answer = getattr(client, method)(url, body, format="json")
        assert answer.status_code == status, answer.content
        error = answer.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert (error["code"], error["param"]) == (code, param), error
        assert error["type"] == "invalid_request_error"
        assert "Traceback" not in answer.content.decode()

    bad_expiry = {"name": "s", "expires_after": {"anchor": "last_active_at", "days": 9999}}
    refused("post", "/v1/vector_stores", bad_expiry, 400, "invalid_expires_after", "expires_after")
    refused("post", "/v1/vector_stores", {"name": 7}, 400, "invalid_name", "name")
    assert not Collection.objects.exists()
    store = client.post("/v1/vector_stores", {"name": "s"}, format="json").json()["id"]
    files = f"/v1/vector_stores/{store}/files"
    refused("post", files, {"file_id": "file-nope"}, 404, "not_found", "file_id")
    tenant = Tenant.objects.get(slug="acme")
    exe = file_create(
        tenant=tenant,
        user=tenant.memberships.get().user,  # the caller's own bytes: refused for what they are
        data=b"MZ\x90\x00" * 64,
        filename="x.exe",
        purpose="assistants",
    )
    answer = client.post(files, {"file_id": exe.pk}, format="json")
    assert 400 <= answer.status_code < 500 and set(answer.json()["error"]) == {
        "message",
        "type",
        "param",
        "code",
    }
    assert not Document.objects.exists()  # nothing stored for a refused file
    search = f"/v1/vector_stores/{store}/search"
    refused(
        "post",
        search,
        {"query": "x", "filters": {"type": "eq", "key": "k"}},
        400,
        "invalid_filter",
        "filters.value",
    )
    refused(
        "post",
        search,
        {"query": "x", "max_num_results": 0},
        400,
        "invalid_max_num_results",
        "max_num_results",
    )
    refused("post", search, {"query": 5}, 400, "invalid_query", "query")
    refused("get", "/v1/vector_stores/vs_0000/files/file-x", None, 404, "not_found", None)


def test_a_batch_of_files_with_their_own_attributes() -> None:
    from rest_framework.test import APIClient

    from documents.services.accounts import user_create_in_tenant

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {user_create_in_tenant(username='a', tenant_slug='acme')}")
    tenant = Tenant.objects.get(slug="acme")
    uploader = tenant.memberships.get().user  # a file object is its uploader's to attach
    store = client.post("/v1/vector_stores", {"name": "s"}, format="json").json()["id"]
    made = [
        file_create(
            tenant=tenant, user=uploader, data=text.encode(), filename=f"{n}.txt", purpose="assistants"
        )
        for n, text in (
            ("heron", "The heron waited in the reeds."),
            ("otter", "The otter slid into the river."),
        )
    ]
    body = {
        "files": [
            {"file_id": made[0].pk, "attributes": {"animal": "bird"}},
            {"file_id": made[1].pk, "attributes": {"animal": "mammal"}},
        ]
    }
    batch = client.post(f"/v1/vector_stores/{store}/file_batches", body, format="json").json()
    assert batch["status"] == "in_progress"
    assert batch["file_counts"] == {"in_progress": 2, "completed": 0, "failed": 0, "cancelled": 0, "total": 2}
    for document in Document.objects.all():
        run_until_idle(document.latest_version.job_id)  # type: ignore[union-attr]
    done = client.get(f"/v1/vector_stores/{store}/file_batches/{batch['id']}").json()
    assert (done["status"], done["file_counts"]["completed"]) == ("completed", 2)
    listed = client.get(f"/v1/vector_stores/{store}/file_batches/{batch['id']}/files").json()["data"]
    assert {f["id"]: f["attributes"] for f in listed} == {
        made[0].pk: {"animal": "bird"},
        made[1].pk: {"animal": "mammal"},
    }
    birds = {"query": "the", "filters": {"type": "eq", "key": "animal", "value": "bird"}}
    hits = client.post(f"/v1/vector_stores/{store}/search", birds, format="json").json()["data"]
    assert [h["file_id"] for h in hits] == [made[0].pk]


def test_one_file_in_two_stores_with_other_chunking_is_chunked_twice_not_copied() -> None:
    tenant = make_tenant()
    static = {"type": "static", "static": {"max_chunk_size_tokens": 120, "chunk_overlap_tokens": 0}}
    small = vs.store_create(
        tenant=tenant, name="a", metadata=None, expires_after=None, chunking_strategy=static
    )
    plain = vs.store_create(
        tenant=tenant, name="b", metadata=None, expires_after=None, chunking_strategy=None
    )
    obj = file_create(tenant=tenant, user=None, data=WORDS.encode(), filename="w.txt", purpose="assistants")
    chunked = {}
    for store in (small, plain):
        attached = vs.file_attach(tenant=tenant, collection=store, file_id=obj.pk)
        job = run_until_idle(vs.job_of(attached).pk)  # type: ignore[union-attr]
        assert job.status == Status.READY
        version = attached.latest_version
        assert version is not None
        assert version.reused_from_id is None  # other chunking: never a dedup source
        chunked[store.name] = list(Chunk.objects.filter(version=version).order_by("ordinal"))
    assert len(chunked["a"]) > len(chunked["b"])
    assert max(model_tokens(c) for c in chunked["b"]) > 120
