"""The OpenAI vector-store API through the official ``openai`` SDK, unchanged, against a real
web server process and a real django-q2 cluster (and reaper) on the same database: files processed
by our jobs, ``completed`` only once searchable, failures with an OpenAI ``last_error``, batches,
search with attribute filters, deletes, cancel during OCR, pagination and tenancy.

The server and the workers use the default sentence-embedding model (``EMBEDDINGS_BACKEND=local``)
so that a paraphrase with no word in common is found by meaning.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from documents.services.accounts import user_create_in_tenant
from tests.api.conftest import start_server
from tests.conftest import Processes, wait_for
from tests.documents import files
from tests.documents.test_ingest_cluster import scanned_pages_pdf

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

NOTES = {
    "lighthouse.txt": "The lighthouse keeper trimmed the lamp wick every evening before the storm rolled in.",
    "orchard.txt": "Apple trees in the orchard were pruned in February and sprayed against scab in spring.",
    "invoice.txt": "Invoice ZX-4471 lists forty kilograms of galvanised roofing nails, due in thirty days.",
    "violin.txt": "The violinist rosined her bow and tuned the strings before the evening concert.",
    "bakery.txt": "The baker kneaded rye dough at dawn and baked twelve loaves in the wood-fired oven.",
}


@pytest.fixture
def env(subprocess_env: dict[str, str], settings: Any, tmp_path: Path) -> dict[str, str]:
    settings.MEDIA_ROOT = tmp_path / "media"
    return {
        **subprocess_env,
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "EMBEDDINGS_BACKEND": "local",
        "OCR_BATCH_SIZE": "1",
        "THROTTLE_UPLOAD_USER": "1000/min",
        "THROTTLE_UPLOAD_IP": "1000/min",
    }


@pytest.fixture
def base_url(processes: Processes, env: dict[str, str]) -> str:
    processes.manage("qcluster", ["qcluster"], env)
    processes.manage("reaper", ["reap_jobs", "--interval", "0.5"], env)
    return start_server(processes, env).base_url


def sdk(base_url: str, token: str) -> OpenAI:
    return OpenAI(base_url=f"{base_url}/v1", api_key=token, max_retries=0, timeout=30)


def named(name: str, data: bytes) -> tuple[str, io.BytesIO]:
    return (name, io.BytesIO(data))


def search_names(client: OpenAI, store: str, query: str, **kwargs: Any) -> list[str]:
    return [r.filename for r in client.vector_stores.search(store, query=query, **kwargs).data]


def test_the_sdk_runs_unchanged_against_the_platform(base_url: str, processes: Processes) -> None:
    token = user_create_in_tenant(username="alice", tenant_slug="acme")
    client = sdk(base_url, token)
    store = client.vector_stores.create(
        name="Field notes", metadata={"team": "ops"}, expires_after={"anchor": "last_active_at", "days": 7}
    )
    assert store.id.startswith("vs_")
    assert store.expires_after is not None and store.expires_after.days == 7

    # A text PDF and a scanned PDF (OCR) polled to completed: searchable at that moment.
    pdf = client.vector_stores.files.upload_and_poll(
        vector_store_id=store.id,
        file=named("pages.pdf", files.text_pdf()),
        attributes={"kind": "pdf"},
        poll_interval_ms=200,
    )
    assert pdf.status == "completed", pdf
    scanned = client.vector_stores.files.upload_and_poll(
        vector_store_id=store.id, file=named("scan.pdf", files.scanned_pdf()), poll_interval_ms=200
    )
    assert scanned.status == "completed", scanned
    assert "scan.pdf" in search_names(client, store.id, files.SCANNED_PHRASE)

    # A hostile file (encrypted PDF) ends failed with an OpenAI error code.
    hostile = client.vector_stores.files.upload_and_poll(
        vector_store_id=store.id, file=named("locked.pdf", files.encrypted_pdf()), poll_interval_ms=200
    )
    assert hostile.status == "failed", hostile
    assert hostile.last_error is not None
    assert hostile.last_error.code == "invalid_file"
    assert hostile.last_error.message

    # A batch of five through the SDK's helper, with its file counts.
    batch = client.vector_stores.file_batches.upload_and_poll(
        store.id, files=[named(n, t.encode()) for n, t in NOTES.items()], poll_interval_ms=200
    )
    assert batch.status == "completed", batch
    assert batch.file_counts.completed == 5
    assert batch.file_counts.total == 5
    listed = client.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id)
    assert len(listed.data) == 5 and {f.status for f in listed.data} == {"completed"}
    ids = {client.files.retrieve(f.id).filename: f.id for f in listed.data}

    # Search: the exact token first, a paraphrase (no shared word) in the top 3.
    assert search_names(client, store.id, "ZX-4471")[0] == "invoice.txt"
    paraphrase = search_names(client, store.id, "a person who tends a coastal beacon", max_num_results=3)
    # by meaning on every backend (PostgreSQL without pgvector: the vectors' sign codes)
    assert "lighthouse.txt" in paraphrase
    hits = client.vector_stores.search(store.id, query="ZX-4471").data
    assert hits[0].file_id == ids["invoice.txt"] and 0 < hits[0].score <= 1
    assert hits[0].content[0].text

    # Attribute filters, then an attribute update changes what the filter finds.
    for name in ("invoice.txt", "violin.txt"):
        client.vector_stores.files.update(ids[name], vector_store_id=store.id, attributes={"dept": "finance"})
    finance = {"type": "eq", "key": "dept", "value": "finance"}
    assert set(search_names(client, store.id, "the evening", filters=finance)) <= {
        "invoice.txt",
        "violin.txt",
    }
    assert "violin.txt" in search_names(client, store.id, "violinist bow", filters=finance)
    client.vector_stores.files.update(
        ids["violin.txt"], vector_store_id=store.id, attributes={"dept": "music"}
    )
    assert "violin.txt" not in search_names(client, store.id, "violinist bow", filters=finance)
    assert "violin.txt" in search_names(client, store.id, "violinist bow")

    # File content is the verified chunks' text; a store's counts and list filter by status.
    content = client.vector_stores.files.content(ids["bakery.txt"], vector_store_id=store.id)
    assert "rye dough" in " ".join(c.text or "" for c in content.data)
    failed = client.vector_stores.files.list(store.id, filter="failed")
    assert [f.id for f in failed.data] == [hostile.id]
    counts = client.vector_stores.retrieve(store.id).file_counts
    assert (counts.completed, counts.failed, counts.total) == (7, 1, 8)

    # Pagination of the store's files across pages (keyset cursors, followed by the SDK).
    first = client.vector_stores.files.list(store.id, limit=3)
    assert len(first.data) == 3 and first.has_more
    every = [f.id for f in client.vector_stores.files.list(store.id, limit=3)]
    assert len(every) == len(set(every)) == 8

    # Delete a file: gone from search at once.
    client.vector_stores.files.delete(ids["invoice.txt"], vector_store_id=store.id)
    assert "invoice.txt" not in search_names(client, store.id, "ZX-4471")
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.files.retrieve(ids["invoice.txt"], vector_store_id=store.id)

    # Another tenant's token: every id answers 404, like an unknown one.
    other = sdk(base_url, user_create_in_tenant(username="mallory", tenant_slug="evil"))
    calls = [
        lambda: other.vector_stores.retrieve(store.id),
        lambda: other.vector_stores.update(store.id, name="mine"),
        lambda: other.vector_stores.search(store.id, query="ZX-4471"),
        lambda: other.vector_stores.files.list(store.id),
        lambda: other.vector_stores.files.retrieve(ids["bakery.txt"], vector_store_id=store.id),
        lambda: other.vector_stores.files.update(ids["bakery.txt"], vector_store_id=store.id, attributes={}),
        lambda: other.vector_stores.files.delete(ids["bakery.txt"], vector_store_id=store.id),
        lambda: other.vector_stores.file_batches.retrieve(batch.id, vector_store_id=store.id),
        lambda: other.vector_stores.file_batches.cancel(batch.id, vector_store_id=store.id),
        lambda: other.files.retrieve(ids["bakery.txt"]),
        lambda: other.vector_stores.delete(store.id),
    ]
    for call in calls:
        with pytest.raises(openai.NotFoundError) as refused:
            call()
        assert refused.value.response.json()["error"]["code"] == "not_found"
    assert "bakery.txt" in search_names(client, store.id, "rye dough baker")

    # Delete the store: gone, and so are its documents from search.
    assert client.vector_stores.delete(store.id).deleted
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.retrieve(store.id)
    # As long as the SDK's own calls may take (httpx's default is 5 s: a loaded machine's first
    # search in the server can take longer).
    everywhere = httpx.get(
        f"{base_url}/api/search",
        params={"q": "rye dough baker"},
        headers={"Authorization": f"Token {token}"},
        timeout=30,
    )
    assert everywhere.status_code == 200 and everywhere.json()["results"] == []


def test_a_batch_cancelled_during_ocr_ends_cancelled(base_url: str, processes: Processes) -> None:
    client = sdk(base_url, user_create_in_tenant(username="alice", tenant_slug="acme"))
    store = client.vector_stores.create(name="Scans")
    uploaded = [
        client.files.create(file=named(f"scan{i}.pdf", scanned_pages_pdf(12)), purpose="assistants")
        for i in range(2)
    ]
    batch = client.vector_stores.file_batches.create(store.id, file_ids=[f.id for f in uploaded])
    assert batch.status == "in_progress"

    def in_ocr() -> str | None:
        page = client.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id)
        return next((f.id for f in page.data if getattr(f, "stage", None) == "ocr"), None)

    reading = wait_for(in_ocr, timeout=90, interval=0.2, what="a file in OCR")
    client.vector_stores.file_batches.cancel(batch.id, vector_store_id=store.id)
    done = client.vector_stores.file_batches.poll(batch.id, vector_store_id=store.id, poll_interval_ms=200)
    assert done.status == "cancelled", done
    # The file in OCR is cancelled; the other may have finished before the cancel reached it (on
    # a loaded machine the second worker can get that far), as OpenAI's cancel also allows:
    # nothing is left running and nothing failed.
    counts = done.file_counts
    assert counts.cancelled >= 1 and counts.in_progress == 0 and counts.failed == 0, counts
    files = client.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id)
    statuses = {f.id: f.status for f in files}
    assert statuses[reading] == "cancelled"
    assert set(statuses.values()) <= {"cancelled", "completed"}


def test_a_collection_filled_through_the_rest_api_is_one_store_in_the_sdk(base_url: str) -> None:
    token = user_create_in_tenant(username="alice", tenant_slug="acme")
    rest = httpx.Client(base_url=f"{base_url}/api", headers={"Authorization": f"Token {token}"}, timeout=30)
    made = rest.post("/collections", json={"name": "Harbour"})
    assert made.status_code == 201, made.text
    cid = made.json()["id"]
    for name in ("harbour.txt", "crane.txt"):
        text = NOTES["lighthouse.txt"] if name == "harbour.txt" else NOTES["bakery.txt"]
        sent = rest.post("/documents/", files={"file": (name, text.encode())}, data={"collection": cid})
        assert sent.status_code == 201, sent.text
    sent = rest.post("/documents/", files={"file": ("violin.txt", NOTES["violin.txt"].encode())})
    assert sent.status_code == 201, sent.text  # into the default collection

    client = sdk(base_url, token)
    store = f"vs_{cid.replace('-', '')}"
    listed = client.vector_stores.files.list(store)
    assert len(listed.data) == 2
    done = [
        client.vector_stores.files.poll(f.id, vector_store_id=store, poll_interval_ms=200) for f in listed
    ]
    assert {f.status for f in done} == {"completed"}
    counts = client.vector_stores.retrieve(store).file_counts
    assert (counts.completed, counts.total) == (2, 2)
    in_rest = {
        d["document_id"] for d in rest.get("/documents/", params={"collection": cid}).json()["results"]
    }
    assert {getattr(f, "document_id", None) for f in listed} == in_rest

    # The file a search hit names is a file, and a file of the store, through the SDK.
    hit = client.vector_stores.search(store, query="lighthouse keeper lamp wick").data[0]
    assert hit.filename == "harbour.txt"
    assert client.files.retrieve(hit.file_id).filename == "harbour.txt"
    found = client.vector_stores.files.retrieve(hit.file_id, vector_store_id=store)
    assert found.status == "completed"
    assert found.chunking_strategy is not None and found.chunking_strategy.type == "static"
    assert found.chunking_strategy.static.max_chunk_size_tokens > 0
    assert found.chunking_strategy.static.chunk_overlap_tokens == 0

    # The default collection is a store of its own with the other document.
    default = next(c for c in rest.get("/collections").json() if c["is_default"])
    default_store = f"vs_{default['id'].replace('-', '')}"
    assert [client.files.retrieve(f.id).filename for f in client.vector_stores.files.list(default_store)] == [
        "violin.txt"
    ]

    # Removed through the SDK: gone from the REST list and from search.
    assert client.vector_stores.files.delete(hit.file_id, vector_store_id=store).deleted
    left = {d["title"] for d in rest.get("/documents/", params={"collection": cid}).json()["results"]}
    assert left == {"crane.txt"}
    assert "harbour.txt" not in search_names(client, store, "lighthouse keeper lamp wick")
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(hit.file_id)
