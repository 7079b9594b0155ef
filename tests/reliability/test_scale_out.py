"""Scale-out: two q2 clusters as two machines would run them (separate processes, separate
environments) over django-q2's Redis broker, sharing the PostgreSQL database and the upload
storage, with the reaper beside them. Uploads come from a third process (``manage.py ingest``).

While the clusters are busy, the Redis database is flushed: the tasks waiting in it are lost. The
reaper sees due queued jobs dispatched long ago while the broker is idle and dispatches them again
(``JOBS_REDISPATCH_AFTER=3``), so every document still ends ready and searchable, each stage runs
once, and both clusters did part of the work.
"""

from __future__ import annotations

import random
import re
import subprocess
import time
import uuid
from collections import Counter
from functools import partial
from pathlib import Path

import pytest
import redis
from pytest_django.fixtures import Settings as DjangoSettings

from documents.models import DocumentVersion, Tenant
from documents.search import search
from jobs.models import FINISHED, Job, StageRun, Status
from tests.conftest import Processes, wait_for
from tests.reliability import generated
from tests.reliability.helpers import check_jobs, descendants, worker_pid

pytestmark = [pytest.mark.postgres, pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

HEAVY = 4  # scanned documents of several pages: they keep every worker busy for a while
LIGHT = 16
STAGES = 5


def started_cluster(pid: int) -> bool:
    """A sentinel with its two workers, a monitor and a pusher are up under ``pid``."""
    return len(descendants(pid)) >= 5


def write_inbox(inbox: Path) -> dict[str, str]:
    """The documents to ingest; returns file name -> phrase. Heavy ones sort (and upload) first."""
    inbox.mkdir()
    phrases = generated.Phrases(random.Random(20))
    phrase_of: dict[str, str] = {}
    for index in range(HEAVY):
        lines = [phrases.next() for _ in range(5)]
        name = f"0-scan-{index}.pdf"
        (inbox / name).write_bytes(generated.scanned_pages_pdf(lines))
        phrase_of[name] = lines[0]
    for item in generated.corpus(LIGHT, phrases, scanned_every=LIGHT + 1, first=1):
        name = f"1-{item.filename}"
        (inbox / name).write_bytes(item.data)
        phrase_of[name] = item.phrase
    return phrase_of


def test_two_clusters_over_redis_survive_a_flushed_broker(
    processes: Processes,
    subprocess_env: dict[str, str],
    redis_url: str,
    settings: DjangoSettings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
):
    settings.MEDIA_ROOT = tmp_path / "shared-media"
    queue_name = f"reliability-{uuid.uuid4().hex[:10]}"
    common = {
        **subprocess_env,
        "Q_BROKER": "redis",
        "REDIS_URL": redis_url,
        "Q_NAME": queue_name,
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "JOBS_REDISPATCH_AFTER": "3",
        "OCR_BATCH_SIZE": "1",
    }
    machines = {}
    for name in ("a", "b"):
        scratch = tmp_path / f"scratch-{name}"
        scratch.mkdir()
        machines[name] = {**common, "TMPDIR": str(scratch)}
    phrase_of = write_inbox(tmp_path / "inbox")
    Tenant.objects.create(slug="scale", name="Scale", max_running_jobs=8)

    clusters = {
        name: processes.manage(f"qcluster-{name}", ["qcluster"], env).pid for name, env in machines.items()
    }
    reaper = processes.manage("reaper", ["reap_jobs", "--interval", "0.5"], machines["a"])
    for name, pid in clusters.items():
        wait_for(partial(started_cluster, pid), timeout=60, what=f"cluster {name} to start")
    seen: dict[int, str] = {}

    def remember_workers() -> None:
        for name, pid in clusters.items():
            seen.update({child: name for child in descendants(pid)})

    started = time.monotonic()
    ingest = processes.manage(
        "ingest", ["ingest", str(tmp_path / "inbox"), "--tenant", "scale", "--timeout", "240"], machines["a"]
    )
    total = HEAVY + LIGHT

    def all_uploaded() -> bool:
        remember_workers()
        return Job.objects.filter(tenant="scale").count() == total

    wait_for(all_uploaded, timeout=120, interval=0.05, what="every upload")
    broker = redis.Redis.from_url(redis_url)
    key = f"django_q:{queue_name}:q"
    lost = broker.llen(key)
    assert isinstance(lost, int)  # the synchronous client (its stubs also admit an awaitable)
    broker.flushdb()  # only our own database
    assert lost > 0, "the clusters had drained the broker before the flush: nothing was lost"

    def all_done() -> bool:
        remember_workers()
        return not Job.objects.filter(tenant="scale").exclude(status__in=FINISHED).exists()

    try:
        wait_for(all_done, timeout=240, interval=0.2, what="every job to finish")
        ingest.wait(timeout=30)
    except (AssertionError, subprocess.TimeoutExpired) as exc:
        raise AssertionError(f"{exc}\n{processes.logs()}") from None
    elapsed = time.monotonic() - started

    jobs = list(Job.objects.filter(tenant="scale"))
    assert Counter(job.status for job in jobs) == {Status.READY: total}, [
        (job.status, job.error_code) for job in jobs
    ]
    assert ingest.returncode == 0, processes.logs()
    # The reaper's passes report what they dispatched again (the log of this run only).
    log = next(path for name, proc, path in processes.procs if proc is reaper).read_text()
    redispatched = sum(int(n) for n in re.findall(r"dispatched: (\d+)", log))
    assert redispatched >= lost, log

    # Each stage ran once per job: the lost tasks were replaced, not doubled. (A job whose pages
    # all have text passes over OCR at parsing, without a run of it.)
    runs = list(StageRun.objects.filter(job__tenant="scale"))
    per_stage = Counter((run.job_id, run.stage) for run in runs)
    assert set(per_stage.values()) == {1}, per_stage
    per_job = Counter(run.job_id for run in runs)
    assert set(per_job.values()) <= {STAGES - 1, STAGES}, per_job
    assert all(per_job[job.pk] == STAGES or "ocr" in job.skipped_stages for job in jobs), per_job
    assert {run.outcome for run in runs} <= {"advanced", "skipped", "ready"}

    # Both machines worked.
    by_cluster = Counter(seen.get(worker_pid(run.worker_name), "?") for run in runs)
    assert by_cluster["a"] > 0 and by_cluster["b"] > 0, by_cluster
    assert by_cluster["?"] == 0, "a stage ran outside both clusters"

    # Ready means searchable, for every document, by its own phrase.
    tenant = Tenant.objects.get(slug="scale")
    for published in DocumentVersion.objects.filter(document__tenant=tenant, published_at__isnull=False):
        hits = search(tenant, phrase_of[published.original_name], k=5)
        assert any(hit.version_id == published.pk for hit in hits), published.original_name

    checked = check_jobs(machines["b"])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with capsys.disabled():
        print(
            f"\nscale-out: {total} documents ready in {elapsed:.0f}s; {lost} tasks lost in the flush, "
            f"{redispatched} jobs dispatched again by the reaper; stage runs by cluster: "
            f"{dict(sorted(by_cluster.items()))}"
        )
