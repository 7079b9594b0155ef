"""Folder sources synced as a tracked job: first sync, unchanged and changed re-syncs, removals
under both policies, and a sync interrupted mid-apply that converges when run again."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from documents.kinds import INGEST, SYNC
from documents.models import Batch, Deletion, Document, DocumentVersion
from documents.sources.models import Source, SourceItem, SourceSync
from documents.sources.services import sync_start
from jobs import pipelines
from jobs.context import StageContext
from jobs.executor import run_stage
from jobs.models import FINISHED, Job, Status
from jobs.quotas import WAITING
from jobs.services.reaper import reap
from jobs.services.worker import job_claim
from tests.documents.helpers import found_versions, make_tenant, run_until_idle, top_hit
from tests.documents.source_helpers import folder_source, ingest_all, sync, sync_job, write

pytestmark = pytest.mark.django_db

FILES = {
    "guide/onboarding.md": "# Onboarding\n\nEvery newcomer receives a brass compass on the first day.\n",
    "guide/holidays.txt": "Holidays: the office closes for the lantern festival each autumn.\n",
    "notes.txt": "The cafeteria serves saffron risotto on Thursdays.\n",
}


@pytest.fixture
def root(tmp_path: Path, settings) -> Path:
    settings.SOURCES_ALLOWED_ROOTS = [str(tmp_path)]
    folder = tmp_path / "handbook"
    for key, text in FILES.items():
        write(folder, key, text)
    return folder


def live_documents(tenant) -> list[Document]:
    return list(Document.objects.filter(tenant=tenant, deleted_at=None))


def test_first_sync_ingests_every_file_to_ready_and_searchable(root):
    tenant = make_tenant()
    source = folder_source(tenant, root)
    done = sync(source)
    assert done.counts == {"found": 3, "new": 3, "changed": 0, "removed": 0, "unchanged": 0, "failed": 0}
    documents = live_documents(tenant)
    assert len(documents) == 3
    assert all(d.published_version_id is not None for d in documents)
    assert all(d.collection_id == source.collection_id for d in documents)
    hit = top_hit(tenant, "brass compass")
    assert hit is not None
    assert hit.document_id == SourceItem.objects.get(key="guide/onboarding.md").document_id
    assert done.batch is not None and done.batch.items.count() == 3


def test_an_unchanged_resync_parses_and_embeds_nothing(root):
    tenant = make_tenant()
    source = folder_source(tenant, root)
    sync(source)
    ingest_jobs, versions = Job.objects.filter(kind=INGEST).count(), DocumentVersion.objects.count()
    # A file touched without a change of content: its marker moves, its hash does not.
    path = root / "notes.txt"
    later = path.stat().st_mtime_ns + 10**9
    os.utime(path, ns=(later, later))
    again = sync(source)
    assert again.counts["unchanged"] == 3 and again.counts["new"] == again.counts["changed"] == 0
    assert Job.objects.filter(kind=INGEST).count() == ingest_jobs
    assert DocumentVersion.objects.count() == versions
    assert again.batch is None  # nothing was made: no batch
    assert SourceItem.objects.get(key="notes.txt").marker.startswith(str(later))


def test_a_changed_file_becomes_a_new_version_and_the_old_serves_until_it_publishes(root):
    tenant = make_tenant()
    source = folder_source(tenant, root)
    sync(source)
    item = SourceItem.objects.get(key="notes.txt")
    old = Document.objects.get(pk=item.document_id).published_version_id
    write(root, "notes.txt", "The cafeteria now serves juniper dumplings on Thursdays.\n")
    job = sync_job(source)
    assert SourceSync.objects.get(job=job).counts["changed"] == 1
    document = Document.objects.get(pk=item.document_id)
    assert document.latest_number == 2 and document.published_version_id == old
    assert old in found_versions(tenant, "saffron risotto")  # the old version still serves
    assert found_versions(tenant, "juniper dumplings") == set()
    assert ingest_all() == 1
    document.refresh_from_db()
    assert document.published_version_id != old
    assert found_versions(tenant, "juniper dumplings") == {document.published_version_id}
    assert old not in found_versions(tenant, "saffron risotto")
    assert len(live_documents(tenant)) == 3


def test_a_removed_file_is_deleted_from_search_and_lists_with_its_audit_record(root):
    tenant = make_tenant()
    source = folder_source(tenant, root)
    sync(source)
    document_id = SourceItem.objects.get(key="notes.txt").document_id
    (root / "notes.txt").unlink()
    done = sync(source)
    assert done.counts["removed"] == 1 and done.counts["unchanged"] == 2
    assert found_versions(tenant, "saffron risotto") == set()
    assert document_id not in {d.pk for d in live_documents(tenant)}
    assert Deletion.objects.filter(document_id=document_id, via="source").exists()
    assert not SourceItem.objects.filter(key="notes.txt").exists()


def test_a_removed_file_is_kept_under_the_keep_policy(root):
    tenant = make_tenant()
    source = folder_source(tenant, root, on_removal=Source.OnRemoval.KEEP)
    sync(source)
    document_id = SourceItem.objects.get(key="notes.txt").document_id
    (root / "notes.txt").unlink()
    done = sync(source)
    assert done.counts["removed"] == 1
    assert document_id in {d.pk for d in live_documents(tenant)}
    assert found_versions(tenant, "saffron risotto") != set()
    assert SourceItem.objects.get(key="notes.txt").removed_at is not None
    assert sync(source).counts["removed"] == 0  # told once


def test_an_unreadable_file_is_a_per_item_failure_and_the_others_sync(root):
    tenant = make_tenant()
    source = folder_source(tenant, root)
    (root / "empty.txt").write_bytes(b"")
    done = sync(source)
    assert done.counts["new"] == 4 and done.counts["failed"] == 1
    failed = SourceItem.objects.get(key="empty.txt")
    assert failed.error_code == "file_empty" and failed.document_id is None
    assert len(live_documents(tenant)) == 3
    batch = Batch.objects.get(pk=done.batch_id)
    assert batch.completed_at is not None


class WorkerDied(BaseException):
    """The worker process ends here (as a SIGKILL would): nothing after it runs."""


class DyingContext(StageContext):
    """The real context of a stage whose worker dies right after the ``lives``-th item committed,
    before the checkpoint that says so: a re-run starts again at that item."""

    lives = 3

    def write(self, checkpoint=None, **kwargs):
        if checkpoint is not None:
            type(self).lives -= 1
            if type(self).lives < 0:
                raise WorkerDied()
        return super().write(checkpoint, **kwargs)


def test_a_sync_whose_worker_dies_mid_apply_converges_when_run_again(root):
    for n in range(4):
        write(root, f"more/extra-{n}.txt", f"Extra page {n} mentions the word quokka{n}.\n")
    tenant = make_tenant()
    source = folder_source(tenant, root)
    job_id = sync_start(source=source).sync.job_id
    claim = job_claim(job_id=job_id, worker="doomed")
    while claim is not None and claim.job.stage != "apply":
        claim = run_stage(claim)
    assert claim is not None
    pipeline = pipelines.get(SYNC)
    ctx = DyingContext(claim, pipeline, pipeline.stage("apply"))
    DyingContext.lives = 3
    with pytest.raises(WorkerDied):
        pipeline.stage("apply").handler(ctx)
    applied = SourceItem.objects.exclude(document=None).count()
    assert applied == 4  # three checkpointed, the fourth committed without its checkpoint
    assert Job.objects.get(pk=job_id).checkpoint == {"next": 3}
    # The lease runs out; the reaper recovers the resumable stage and a new worker resumes.
    reap(now=timezone.now() + timedelta(minutes=5))
    job = run_until_idle(job_id)
    assert job.status == Status.READY
    ingest_all()
    assert len(live_documents(tenant)) == 7
    assert Document.objects.filter(tenant=tenant).count() == 7  # no duplicate was ever made
    assert DocumentVersion.objects.count() == 7
    assert SourceItem.objects.exclude(document=None).count() == 7
    assert sync(source).counts["unchanged"] == 7


def test_the_sync_source_command_runs_a_sync_inline_and_prints_its_counts(root):
    from io import StringIO

    from django.core.management import call_command
    from django.core.management.base import CommandError

    tenant = make_tenant()
    source = folder_source(tenant, root)
    out = StringIO()
    call_command("sync_source", str(source.pk), "--inline", stdout=out)
    assert "ready: found 3, new 3, changed 0, removed 0, unchanged 0, failed 0" in out.getvalue()
    assert Job.objects.filter(kind=INGEST, status=Status.QUEUED).count() == 3
    with pytest.raises(CommandError, match="no source"):
        call_command("sync_source", "not-an-id", stdout=StringIO())


def test_a_sync_tells_subscribed_webhooks_source_synced_and_its_batch_completed(root, settings):
    from documents.models import WebhookMessage
    from documents.services.webhooks import webhook_endpoint_create

    settings.WEBHOOK_ALLOW_PRIVATE = True
    tenant = make_tenant()
    webhook_endpoint_create(
        tenant=tenant, url="http://127.0.0.1:9/hooks", events=["source.synced", "batch.completed"]
    )
    source = folder_source(tenant, root)
    job = sync_job(source)
    synced = WebhookMessage.objects.get(event_type="source.synced")
    data = synced.payload["data"]
    assert data["source_id"] == str(source.pk) and data["job_id"] == str(job.pk)
    assert data["counts"] == {"found": 3, "new": 3, "changed": 0, "removed": 0, "unchanged": 0, "failed": 0}
    assert not WebhookMessage.objects.filter(event_type="batch.completed").exists()  # still ingesting
    ingest_all()
    completed = WebhookMessage.objects.get(event_type="batch.completed")
    assert completed.payload["data"]["batch_id"] == data["batch_id"]
    assert completed.payload["data"]["file_counts"]["ready"] == 3


def test_a_schedule_is_a_django_q_schedule_that_starts_a_sync_or_leaves_the_running_one(root):
    from django_q.models import Schedule

    from documents.sources.schedules import schedule_name
    from documents.sources.services import source_update
    from documents.sources.tasks import sync_scheduled

    tenant = make_tenant()
    source = folder_source(tenant, root, schedule_minutes=15)
    schedule = Schedule.objects.get(name=schedule_name(source.pk))
    assert (schedule.func, schedule.minutes) == ("documents.sources.tasks.sync_scheduled", 15)
    assert sync_scheduled(str(source.pk)) == "started"
    assert sync_scheduled(str(source.pk)) == "running"
    assert SourceSync.objects.filter(source=source).count() == 1
    source_update(source=source, schedule_minutes=None)
    assert not Schedule.objects.filter(name=schedule_name(source.pk)).exists()


def test_a_failed_sync_retried_opens_again_only_while_no_other_sync_runs(root, settings):
    from documents.sources.services import SourceRefused
    from jobs.services.lifecycle import job_retry

    tenant = make_tenant()
    source = folder_source(tenant, root)
    job_id = sync_start(source=source).sync.job_id
    settings.SOURCES_ALLOWED_ROOTS = [str(root / "guide")]  # the folder is no longer allowed
    failed = run_until_idle(job_id)
    assert (failed.status, failed.error_code) == (Status.FAILED, "folder_unavailable")
    assert SourceSync.objects.get(job_id=job_id).finished_at is not None
    settings.SOURCES_ALLOWED_ROOTS = [str(root.parent)]
    newer = sync_start(source=source).sync  # the failed one is finished: a new sync starts
    job_retry(job_id=job_id)
    refused = run_until_idle(job_id)
    assert (refused.status, refused.error_code) == (Status.FAILED, "sync_running")
    assert SourceSync.objects.filter(source=source, finished_at=None).get() == newer
    assert run_until_idle(newer.job_id).status == Status.READY
    job_retry(job_id=job_id)  # now nothing else runs: the retried sync opens and finishes
    assert run_until_idle(job_id).status == Status.READY
    assert not SourceSync.objects.filter(source=source, finished_at=None).exists()
    assert len(live_documents(tenant)) == 3
    settings.SOURCES_ALLOWED_ROOTS = []
    with pytest.raises(SourceRefused):
        sync_start(source=source)


@pytest.mark.django_db(transaction=True)  # q2's scheduler closes old connections first
def test_a_due_cron_schedule_starts_a_sync_through_the_scheduler_or_none_while_one_runs(root):
    from datetime import datetime

    from croniter import croniter
    from django_q.brokers import get_broker
    from django_q.models import Schedule
    from django_q.scheduler import scheduler
    from django_q.signing import SignedPackage

    from documents.sources.schedules import TASK, schedule_name
    from documents.sources.tasks import sync_scheduled

    tenant = make_tenant()
    source = folder_source(tenant, root, schedule_cron="*/5 * * * *")
    row = Schedule.objects.get(name=schedule_name(source.pk))
    assert row.schedule_type == Schedule.CRON
    broker = get_broker()
    broker.purge_queue()

    def run_due() -> list[str]:
        """The q2 scheduler's pass over due schedules, then each task it queued, as a worker runs it."""
        Schedule.objects.filter(pk=row.pk).update(next_run=timezone.now() - timedelta(minutes=1))
        scheduler(broker=broker)
        answers = []
        while queued := broker.dequeue():
            for task_id, payload in queued:
                task = SignedPackage.loads(payload)
                if task["func"] == TASK:  # the platform's other schedules and dispatches are not ours
                    answers.append(sync_scheduled(*task["args"]))
                broker.acknowledge(task_id)
        return answers

    assert run_due() == ["started"]
    next_run = Schedule.objects.get(pk=row.pk).next_run
    assert next_run == croniter("*/5 * * * *", next_run - timedelta(minutes=5)).get_next(datetime)
    assert next_run > timezone.now()
    # The sync it started still runs: the next due run starts none.
    assert run_due() == ["running"]
    assert SourceSync.objects.filter(source=source).count() == 1
    run_until_idle(SourceSync.objects.get(source=source).job_id)
    assert run_due() == ["started"]
    assert SourceSync.objects.filter(source=source).count() == 2


def test_a_full_queue_makes_the_sync_wait_for_its_documents_not_fail_them(root):
    """A first sync of more files than the workspace's queue holds: each time the queue is
    full the stage stops (freeing the worker for the documents) and resumes after a delay from
    the item it stopped at; no file is failed for it and none is applied twice."""
    for n in range(4):
        write(root, f"more/extra-{n}.txt", f"Extra page {n} mentions the word quokka{n}.\n")
    tenant = make_tenant()
    tenant.max_queued_jobs = 2
    tenant.save(update_fields=["max_queued_jobs"])
    source = folder_source(tenant, root)
    job_id = sync_start(source=source).sync.job_id
    waits = 0
    job = run_until_idle(job_id)
    while job.status != Status.READY:
        assert job.status not in FINISHED, (job.status, job.error_code)
        assert job.error_code == "sync_queue_full"
        assert Job.objects.filter(kind=INGEST, status__in=WAITING).count() == 2  # the queue is full
        ingest_all()  # the workers process the documents...
        Job.objects.filter(pk=job_id).update(not_before=timezone.now())  # ...and the delay passes
        waits += 1
        job = run_until_idle(job_id)
    ingest_all()
    assert waits >= 2
    done = SourceSync.objects.get(job_id=job_id)
    assert done.counts == {"found": 7, "new": 7, "changed": 0, "removed": 0, "unchanged": 0, "failed": 0}
    assert not SourceItem.objects.exclude(error_code="").exists()
    assert Document.objects.filter(tenant=tenant).count() == 7 == len(live_documents(tenant))
