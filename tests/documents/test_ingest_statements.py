"""How many SQL statements a worker sends to ingest one small document, on each database.

On PostgreSQL the bulk load of small documents spends its time on the number of statements, the
database server's CPU as much as the worker's (bench/README.md, "Where the PostgreSQL wall time
goes"): each one repeated per stage costs about as much as the work it repeats. The count here
is deterministic (every progress report is written, a progress event at most once an hour), so a
read or a write that creeps back in shows as a number, not as a slower benchmark.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from documents.models import Tenant
from jobs.models import JobEvent, Status
from tests.documents.helpers import make_tenant, run_until_idle, upload

pytestmark = pytest.mark.django_db(transaction=True)

# About 5 KB of plain text in three sections: a small document of the bulk load (2-30 KB), one
# page, three chunks, one embedding batch and one index batch.
TEXT = "\n\n".join(
    f"Section {n}. The harbour master writes down the tides, the boats that left at dawn and the "
    f"weather of the day, then the catch of each boat and the price it fetched at the market. " * 9
    for n in range(1, 4)
)

# The job's statements from its claim to the task's last look for it, as the worker sends them,
# BEGIN and COMMIT included (7 transactions). Where they go on PostgreSQL (the suite's server,
# without pgvector: the probe's meaning search goes by sign codes):
#   claim       7  the job; the tenant's running quota (its limit, the advisory lock, the count);
#                  the compare-and-set with its event and stage run
#   parsing     7  the version with its document and tenant (once for the whole task); the
#                  batch's checkpoint and progress in one UPDATE, which is also the lease check
#                  and the row's lock, and takes the event's slot; the event; the pages; one read
#                  for whether a page needs OCR or has text
#   chunking    9  the stage move (one statement); the tenant's embedders (both names, fresh); the
#                  pages; checkpoint and progress; the old chunks, the chunks, the chunking record
#   embedding   7  the move; the chunks; the embedders; checkpoint and progress; the vectors (one
#                  batch: no report of the total before it)
#   indexing   23  the move; the embedders and the counts of chunks and vectors; the ordinals;
#                  checkpoint and progress; the vectors and chunks, the entries; the version's
#                  title words and length (the page score counts the title once); the probe: the
#                  first chunks and the search (10 with the tenant's average page, one transaction
#                  of its own)
#   publish    14  the compare-and-set; the finish hooks (the version for the webhook, its
#                  endpoints, the batch); the publish hook (the version, the document and tenant
#                  locked, the vectors twice, two UPDATEs); the tenant's next job
#   afterwards  2  the task's last look for the job, and this test's reload of it
# Before (90), the stages read the version 5 times and the tenant's row 4 times, every progress
# report took the event's slot in an UPDATE of its own, every batch locked the row before its
# checkpoint's UPDATE, and the embedding stage reported its total in a transaction of its own;
# the page score's title and average page then added two (67 -> 69).
POSTGRES_STATEMENTS = 69
# SQLite: the same reads and writes, no advisory lock, the stage moves' run and timing writes as
# statements of their own, and its own full-text and vector statements (108 before; 86 before the
# page score's two).
SQLITE_STATEMENTS = 88


@pytest.fixture(autouse=True)
def deterministic(settings, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.JOBS_PROGRESS_WRITE_SECONDS = 0
    settings.JOBS_PROGRESS_EVENT_SECONDS = 3600


def ingest(tenant: Tenant, data: bytes, filename: str) -> tuple[list[str], int]:
    """The statements of the job's run in this process, and the job's progress events."""
    result = upload(tenant, data, filename)
    assert result.job is not None
    with CaptureQueriesContext(connection) as captured:
        job = run_until_idle(result.job.pk)
    assert job.status == Status.READY
    events = JobEvent.objects.filter(job=job, kind=JobEvent.Kind.PROGRESS).count()
    return [q["sql"] for q in captured.captured_queries], events


def test_a_small_documents_ingest_sends_a_bounded_number_of_statements():
    tenant = make_tenant("acme")
    # The first document pays for what a worker reads once per process (the index's columns).
    ingest(tenant, TEXT.encode(), "first.txt")
    statements, events = ingest(Tenant.objects.get(pk=tenant.pk), (TEXT + " Again.").encode(), "notes.txt")
    shown = "\n".join(sql[:100] for sql in statements)
    postgres = connection.vendor == "postgresql"
    assert len(statements) <= (POSTGRES_STATEMENTS if postgres else SQLITE_STATEMENTS), shown
    # The repeats that were cut, each by itself: the version row read by the stages once (the
    # publish and the webhook read it in the finishing transaction), the tenant's row never on
    # its own, one UPDATE of the job per progress report, no lease lock of its own for a batch
    # with a checkpoint.
    versions = [sql for sql in statements if sql.startswith('SELECT "documents_documentversion"."id"')]
    assert len(versions) == 3, shown
    assert not [sql for sql in statements if sql.startswith('SELECT "documents_tenant"."id"')], shown
    progress = [sql for sql in statements if sql.startswith('UPDATE "jobs_job" SET "progress"')]
    assert len(progress) == 4, shown  # one a stage that ran
    slots = [sql for sql in statements if sql.startswith('UPDATE "jobs_job" SET "progress_event_at"')]
    assert not slots and not [sql for sql in statements if "FOR NO KEY UPDATE" in sql], shown
    # One progress event for the whole task: none is due within the hour after the first.
    assert events == 1
