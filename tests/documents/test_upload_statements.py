"""How many SQL statements the web tier sends to take one uploaded file, on each database.

The bulk load through ``/api/batches`` and ``/api/documents`` is bounded by these statements as
much as the worker's (bench/README.md, "Statements of the web tier"): each one repeated per file
costs a round trip and the database server's work, for every file. The count is deterministic, so
a read or a write that creeps back in shows as a number here, not as a slower benchmark.

The quotas are answered once per file, under their locks, in the transaction that creates the
version; a batch looks at them once more, before its first file, so that a full workspace
refuses its files before their bytes are stored. Both answers are tested here too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from documents.models import Document, DocumentVersion, Tenant
from documents.services.files import file_create
from jobs.models import Job
from tests.documents.helpers import files_under
from tests.documents.test_delete import client_for

pytestmark = pytest.mark.django_db(transaction=True)

# One POST /api/documents of a small text file, as the test client sends it (BEGIN and COMMIT
# included). Where they go on PostgreSQL:
#   request     13  the token with its user and tenant; the two upload throttles (a read, and a
#                   write in a transaction of its own, with the cache's count of its rows)
#   creating    19  BEGIN; the byte quota (its advisory lock, the versions' and the files'
#                   bytes); the default collection, read under the lock its grants need; the
#                   document and its grant; the dedup look; the job (in a savepoint: the tenant's
#                   queue limit, its advisory lock and count, the job, its enqueue, its task);
#                   the version with its job; the document's number and latest version in one
#                   UPDATE; COMMIT
# Before (41), the queue (its limit and count) and the stored bytes were also looked at before
# the transaction, the default collection was read once, then again under its lock, the new
# document's empty grants were deleted, its number and its latest version were two UPDATEs, the
# version's job a third, and the document was read again after the commit.
POSTGRES_UPLOAD = 32
# SQLite: the same, without the two advisory locks, and the enqueue's event as a statement of its
# own (40 before).
SQLITE_UPLOAD = 31
# A further file of a batch: the creating transaction above (its collection is the first
# file's, locked by the grants) and the batch's item. Before (29 on PostgreSQL, 28 on SQLite)
# each file also looked at the queue and the stored bytes before its transaction, read the
# tenant's default collection, and paid the four statements above.
POSTGRES_BATCH_FILE = 20
SQLITE_BATCH_FILE = 19

TEXT = b"Plain notes from the harbour.\nThe tide was high.\n\nSecond paragraph about amber falcons.\n"

QUEUE_LIMIT = 'SELECT "documents_tenant"."max_running_jobs"'
QUEUE_COUNT = 'SELECT COUNT(*) AS "__count" FROM "jobs_job"'
VERSION_BYTES = 'SELECT SUM("__col1")'
FILE_BYTES = 'SELECT SUM("documents_fileobject"."bytes")'
DEFAULT_COLLECTION = 'SELECT "documents_collection"."id", "documents_collection"."tenant_id"'
COLLECTION_READ = 'SELECT "documents_collection"."id"'
DOCUMENT_READ = 'SELECT "documents_document"."id", "documents_document"."tenant_id"'


@pytest.fixture(autouse=True)
def media(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return Path(settings.MEDIA_ROOT)


@pytest.fixture
def alice() -> APIClient:
    client = client_for("alice", "acme")
    # The first upload pays for what is made once (the default collection).
    post_one(client, TEXT, "first.txt")
    return client


def post_one(client: APIClient, data: bytes, name: str) -> Any:
    response = client.post("/api/documents/", {"file": SimpleUploadedFile(name, data)}, format="multipart")
    assert response.status_code == 201, response.content
    return response


def post_batch(client: APIClient, count: int, tag: str) -> list[str]:
    """The statements of one POST /api/batches of ``count`` small distinct text files."""
    files = [SimpleUploadedFile(f"{tag}-{n}.txt", TEXT + f"{tag} {n}".encode()) for n in range(count)]
    with CaptureQueriesContext(connection) as captured:
        response = client.post("/api/batches", {"files": files}, format="multipart")
    assert response.status_code == 201, response.content
    assert response.json()["file_counts"]["total"] == count, response.content
    return [q["sql"] for q in captured.captured_queries]


def starting(statements: list[str], prefix: str) -> int:
    return sum(1 for sql in statements if sql.startswith(prefix))


def test_one_upload_sends_a_bounded_number_of_statements(alice: APIClient) -> None:
    with CaptureQueriesContext(connection) as captured:
        post_one(alice, TEXT + b"Again.", "notes.txt")
    statements = [q["sql"] for q in captured.captured_queries]
    shown = "\n".join(sql[:100] for sql in statements)
    postgres = connection.vendor == "postgresql"
    assert len(statements) <= (POSTGRES_UPLOAD if postgres else SQLITE_UPLOAD), shown
    # The repeats that were cut, each by itself: the queue and the stored bytes answered once
    # (under their locks), no delete of a new document's grants, one UPDATE of the document and
    # none of the version, and no read of the document after its commit.
    for once in (QUEUE_LIMIT, QUEUE_COUNT, VERSION_BYTES, FILE_BYTES):
        assert starting(statements, once) == 1, (once, shown)
    assert not starting(statements, 'DELETE FROM "documents_documentgrant"'), shown
    assert starting(statements, 'UPDATE "documents_document"') == 1, shown
    assert not starting(statements, 'UPDATE "documents_documentversion"'), shown
    assert not starting(statements, DOCUMENT_READ), shown
    # The default collection read once, under the lock its document's grants need.
    collections = [sql for sql in statements if sql.startswith(COLLECTION_READ)]
    assert len(collections) == 1, shown
    assert not postgres or collections[0].endswith("FOR UPDATE"), collections


def test_a_further_file_of_a_batch_sends_a_bounded_number_of_statements(alice: APIClient) -> None:
    two, five = post_batch(alice, 2, "two"), post_batch(alice, 5, "five")
    per_file = (len(five) - len(two)) / 3
    postgres = connection.vendor == "postgresql"
    assert per_file <= (POSTGRES_BATCH_FILE if postgres else SQLITE_BATCH_FILE), "\n".join(five)
    shown = "\n".join(sql[:100] for sql in five)
    # The batch looks at the quotas once before its files, then once per file under the locks
    # (before, twice per file); it reads the default collection once, not once per file.
    for once_more in (QUEUE_LIMIT, QUEUE_COUNT, VERSION_BYTES, FILE_BYTES):
        assert starting(five, once_more) == 5 + 1, (once_more, shown)
    assert starting(five, DEFAULT_COLLECTION) == 1, shown
    assert not starting(five, 'DELETE FROM "documents_documentgrant"'), shown
    assert starting(five, 'UPDATE "documents_document"') == 5, shown
    assert not starting(five, DOCUMENT_READ), shown


def test_a_batch_to_a_full_queue_refuses_every_file_before_storing_it(media: Path) -> None:
    client = client_for("alice", "acme")
    Tenant.objects.filter(slug="acme").update(max_queued_jobs=1)
    post_one(client, TEXT, "first.txt")
    files = [SimpleUploadedFile(f"{n}.txt", TEXT + str(n).encode()) for n in range(3)]
    with CaptureQueriesContext(connection) as captured:
        response = client.post("/api/batches", {"files": files}, format="multipart")
    assert response.status_code == 201, response.content
    body = response.json()
    assert [d["error"]["code"] for d in body["documents"]] == ["quota_exceeded"] * 3
    assert body["file_counts"]["rejected"] == 3
    statements = [q["sql"] for q in captured.captured_queries]
    # The one early look answered every file: no file's transaction was begun.
    assert starting(statements, QUEUE_COUNT) == 1, statements
    assert not starting(statements, 'INSERT INTO "documents_document"'), statements
    assert len(files_under(media)) == 1  # the first upload's file only
    assert (Document.objects.count(), Job.objects.count()) == (1, 1)


def test_a_batch_that_fills_the_queue_is_refused_by_the_locked_answer_and_keeps_no_bytes(
    media: Path,
) -> None:
    client = client_for("alice", "acme")
    Tenant.objects.filter(slug="acme").update(max_queued_jobs=2)
    files = [SimpleUploadedFile(f"{n}.txt", TEXT + str(n).encode()) for n in range(3)]
    response = client.post("/api/batches", {"files": files}, format="multipart")
    assert response.status_code == 201, response.content
    body = response.json()
    # The early look found room; the third file is refused under the engine's lock, with the
    # same code and message as a single upload's, and its stored bytes are removed.
    refused = [d["error"] for d in body["documents"] if "error" in d]
    assert [e["code"] for e in refused] == ["quota_exceeded"]
    assert "2 documents waiting" in refused[0]["message"]
    assert (Document.objects.count(), DocumentVersion.objects.count(), Job.objects.count()) == (2, 2, 2)
    assert len(files_under(media)) == 2


def test_a_single_upload_to_a_full_queue_is_answered_429_and_keeps_no_bytes(media: Path) -> None:
    client = client_for("alice", "acme")
    Tenant.objects.filter(slug="acme").update(max_queued_jobs=1)
    post_one(client, TEXT, "first.txt")
    response = client.post(
        "/api/documents/", {"file": SimpleUploadedFile("second.txt", TEXT + b"2")}, format="multipart"
    )
    assert response.status_code == 429, response.content
    assert response.json()["error"]["code"] == "quota_exceeded"
    assert len(files_under(media)) == 1
    assert (Document.objects.count(), Job.objects.count()) == (1, 1)


def test_a_v1_file_looks_at_the_stored_bytes_once() -> None:
    tenant = Tenant.objects.create(slug="acme", name="Acme")
    with CaptureQueriesContext(connection) as captured:
        file_create(tenant=tenant, user=None, data=TEXT, filename="notes.txt", purpose="assistants")
    statements = [q["sql"] for q in captured.captured_queries]
    # Under its lock in the creating transaction only (before, also before the bytes were stored).
    assert (starting(statements, VERSION_BYTES), starting(statements, FILE_BYTES)) == (1, 1), statements
