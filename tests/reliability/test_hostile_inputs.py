"""Hostile and malformed files through the real upload service and the real pipeline.

Each file of the corpus (``tests/reliability/corpus.py``) is either refused at upload with its own
code, or its job ends within its deadline in ``ready`` (where the file is readable) or ``failed``
with one specific cause: never ``internal_error``, never a hang. Most files run in this process
through the real executor (``run_job``); the files that hang a parser, and a job that kills its
worker, run on a real django-q2 cluster with the reaper beside it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
from pytest_django.fixtures import Settings as DjangoSettings

from documents.engines import ocr
from documents.engines.validation import UploadRejected
from documents.models import Chunk, Document, IndexEntry, Page, Tenant
from jobs import pipelines
from jobs.errors import get_cause
from jobs.models import FINISHED, Job, JobEvent, StageRun, Status
from jobs.services.lifecycle import job_cancel, job_create
from tests.conftest import Processes, wait_for
from tests.documents import files
from tests.documents.helpers import (
    JobThread,
    files_under,
    found_versions,
    make_tenant,
    run_until_idle,
    upload,
)
from tests.reliability import corpus, poison
from tests.reliability.corpus import Ends, Hostile, Rejected
from tests.reliability.helpers import alive, worker_pid
from tests.testapp.pipelines import KIND as TOY_KIND
from tests.timing import hold_for

# What these prove (the parsing sandbox's walls, the causes of hostile files, a poison job
# against its worker) does not depend on the database: they run in the SQLite pass only.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.database_neutral]


@pytest.fixture(autouse=True)
def media(settings: DjangoSettings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return Path(settings.MEDIA_ROOT)


@pytest.fixture
def tenant() -> Tenant:
    return make_tenant("hostile")


def require_ocr() -> None:
    if not ocr.available_engines():
        if os.environ.get("REQUIRE_OCR") == "1":
            pytest.fail("REQUIRE_OCR=1 but no OCR engine is installed")
        pytest.skip("no OCR engine is installed")


def describe(job: Job) -> str:
    runs = StageRun.objects.filter(job=job).order_by("started_at", "id")
    lines = [f"job {job.status}/{job.stage} error={job.error_code!r} attempts={job.attempts_total}"]
    lines += [f"  {r.stage} #{r.attempt}: {r.outcome} {r.error_code} {r.error_detail[:200]}" for r in runs]
    return "\n".join(lines)


# --- every file of the corpus, in this process --------------------------------------------------


CASES = [
    pytest.param(
        case, id=case.name, marks=[pytest.mark.xfail(strict=True, reason=case.bug)] if case.bug else []
    )
    for case in corpus.CORPUS
]
# A chunk must fit an embedding model's input: max_tokens at a generous 12 characters per token.
MAX_CHUNK_CHARS_PER_TOKEN = 12


@pytest.mark.parametrize("case", CASES)
def test_a_hostile_file_is_refused_or_ends_with_its_own_cause_in_time(
    case: Hostile, tenant: Tenant, media: Path, settings: DjangoSettings
):
    if case.needs_ocr:
        require_ocr()
    data = case.make()
    started = time.monotonic()
    if isinstance(case.expected, Rejected):
        with pytest.raises(UploadRejected) as refused:
            upload(tenant, data, case.filename)
        assert str(refused.value.code) == case.expected.code, refused.value.detail
        assert not Document.objects.exists(), "a refused upload left a document behind"
        assert files_under(media) == [], "a refused upload left a file behind"
        return
    result = upload(tenant, data, case.filename)
    assert result.job is not None
    job = run_until_idle(result.job.pk)
    elapsed = time.monotonic() - started

    outcome = Ends(job.status, job.error_code, job.stage) if job.status == Status.FAILED else Ends(job.status)
    assert outcome == case.expected, describe(job)
    assert elapsed < case.deadline, f"took {elapsed:.1f}s (deadline {case.deadline:.0f}s)"
    internal = StageRun.objects.filter(job=job, error_code="internal_error")
    assert not internal.exists(), describe(job)
    version = result.version
    if job.status == Status.FAILED:
        # The user sees the cause's safe message only, and nothing of the run is searchable.
        assert job.error_message == get_cause(job.error_code).user_message
        assert not IndexEntry.objects.filter(version=version).exists()
        assert Document.objects.get(pk=result.document.pk).published_version_id is None
    else:
        assert Document.objects.get(pk=result.document.pk).published_version_id == version.pk
        longest = max(
            len(text) for text in Chunk.objects.filter(version=version).values_list("text", flat=True)
        )
        assert longest <= settings.CHUNK_MAX_TOKENS * MAX_CHUNK_CHARS_PER_TOKEN, (
            f"a chunk of {longest} characters"
        )
    if case.findable:
        assert version.pk in found_versions(tenant, case.findable), f"{case.findable!r} is not found"
    if case.absent:
        assert not Chunk.objects.filter(version=version, text__contains=case.absent).exists()


# --- a long PDF of pages that only look blank -------------------------------------------------


def test_five_thousand_visually_blank_pages_end_empty_without_an_hour_of_ocr(
    tenant: Tenant, settings: DjangoSettings
):
    require_ocr()
    settings.JOBS_PROGRESS_WRITE_SECONDS = 0
    result = upload(tenant, corpus.white_pages_pdf(), "white.pdf")
    assert result.job is not None
    job_id, version = result.job.pk, result.version
    deadline = 90.0  # a blank check per rendered page (~10 ms) would OCR nothing in about a minute
    worker = JobThread(job_id)
    started = time.monotonic()
    worker.start()
    ocr_started: float | None = None
    projected = 0.0
    while time.monotonic() - started < deadline:
        job = Job.objects.get(pk=job_id)
        if job.status in FINISHED:
            break
        done = sum(Page.objects.filter(version=version).values_list("ocr_attempts", flat=True))
        if done and ocr_started is None:
            ocr_started = time.monotonic()
        if ocr_started is not None and time.monotonic() - ocr_started > 8 and done:
            rate = done / (time.monotonic() - ocr_started)
            projected = corpus.LONG_PDF_PAGES / rate
            if projected > 2 * deadline:
                break  # the verdict is clear: stop the job instead of waiting for it
        hold_for(0.5)  # the poll interval of this deadline-bound wait
    job = Job.objects.get(pk=job_id)
    ocr_done = sum(Page.objects.filter(version=version).values_list("ocr_attempts", flat=True))
    if job.status not in FINISHED:
        job_cancel(job_id=job_id, actor_name="test")
    worker.finish(timeout=60)
    print(
        f"\n5,000 white pages: {ocr_done} pages OCR'd in {time.monotonic() - started:.0f}s; "
        f"projected OCR time for all {corpus.LONG_PDF_PAGES}: {projected / 60:.0f} min"
    )
    assert job.status == Status.FAILED and job.error_code == "empty_input", (
        f"after {time.monotonic() - started:.0f}s the job is {job.status}/{job.stage} with {ocr_done} blank "
        f"pages OCR'd; all {corpus.LONG_PDF_PAGES} would take about {projected / 60:.0f} minutes"
    )


# --- on a real cluster ------------------------------------------------------------------------


@pytest.fixture
def cluster_env(subprocess_env: dict[str, str], media: Path, tmp_path: Path) -> dict[str, str]:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    return {
        **subprocess_env,
        "MEDIA_ROOT": str(media),
        "TMPDIR": str(scratch),
        "JOBS_PIPELINE_MODULES": "tests.reliability.poison",
        "JOBS_STUCK_EXIT_SECONDS": "2",
        "JOBS_REDISPATCH_AFTER": "5",
    }


def start_platform(processes: Processes, env: dict[str, str]) -> subprocess.Popen[bytes]:
    cluster = processes.manage("qcluster", ["qcluster"], env)
    processes.manage("reaper", ["reap_jobs", "--interval", "0.5"], env)
    return cluster


HANGS = [
    pytest.param(
        corpus.markdown_heading_of_spaces,
        "heading.md",
        "parsing",
        id="markdown-heading-then-a-million-spaces",
    ),
    pytest.param(
        corpus.dot_run_paragraph,
        "dots.txt",
        "chunking",
        id="paragraph-with-a-million-dots",
    ),
]


@pytest.mark.cluster
@pytest.mark.parametrize(("make", "filename", "stage"), HANGS)
def test_a_file_that_hangs_a_parser_ends_in_time_and_frees_its_worker(
    make: Callable[[], bytes], filename: str, stage: str, processes: Processes, cluster_env: dict[str, str]
):
    """The hung stage is ended by its deadline (its worker heartbeats until then, so it is never
    taken for lost), and a normal document uploaded next still becomes ready.

    Fails within seconds when the watchdog is starved; passes within seconds once the parser no
    longer hangs; a fix that only bounds the hang takes up to two stage deadlines (2 x 120 s).
    """
    env = {**cluster_env, "JOBS_LEASE_SECONDS": "6"}
    cluster = start_platform(processes, env)
    try:
        watch_a_hang(make, filename, stage)
    finally:
        # A worker inside one long C call ignores SIGTERM: end the cluster's process group now.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(cluster.pid, signal.SIGKILL)


def watch_a_hang(make: Callable[[], bytes], filename: str, stage: str) -> None:
    tenant = make_tenant("hostile")
    hostile = upload(tenant, make(), filename).job
    assert hostile is not None

    names = [s.name for s in pipelines.get(hostile.kind).stages]

    def in_stage() -> bool:
        # In the stage, or already past it (a parser that no longer hangs is through in a blink).
        job = Job.objects.get(pk=hostile.pk)
        reached = names.index(job.stage) >= names.index(stage)
        return reached and (job.status == Status.RUNNING or job.status in FINISHED or job.stage != stage)

    wait_for(in_stage, timeout=60, what=f"the hostile file to reach {stage}")
    normal = upload(tenant, files.text_pdf(["Normal harbor paper 77."]), "normal.pdf").job
    assert normal is not None
    deadline = time.monotonic() + 2 * (120 + 2) + 30
    stalled: list[JobEvent] = []
    while time.monotonic() < deadline:
        stalled = list(JobEvent.objects.filter(job_id=hostile.pk, name="mark_stalled"))
        done = Job.objects.filter(pk__in=[hostile.pk, normal.pk], status__in=FINISHED).count() == 2
        if stalled or done:
            break
        hold_for(0.2)  # the poll interval of this deadline-bound wait
    job = Job.objects.get(pk=hostile.pk)
    if stalled:
        run = StageRun.objects.filter(job=job, stage=stage).order_by("started_at").first()
        pid = worker_pid(run.worker_name) if run else 0
        pytest.fail(
            f"the {stage} stage was stalled as worker_lost ({stalled[0].reason}) while its worker "
            f"{pid} was alive={alive(pid)}: its watchdog could not heartbeat.\n"
            f"{describe(job)}"
        )
    # line_too_long: a line over DOCUMENTS_MAX_LINE_CHARS is refused before pattern parsing.
    assert job.status == Status.READY or (
        job.status == Status.FAILED and job.error_code in ("parse_timeout", "stage_timeout", "line_too_long")
    ), describe(job)
    assert Job.objects.get(pk=normal.pk).status == Status.READY


def run_batch(count: int, *, tenant: str) -> list[Job]:
    return [
        job_create(
            kind=TOY_KIND,
            tenant=tenant,
            subject_id=str(uuid.uuid4()),
            payload={"pages": 4, "page_sleep": 0.7},
        )
        for _ in range(count)
    ]


def makespan(jobs: list[Job], timeout: float) -> tuple[float, datetime]:
    """Seconds from the first job's creation to the last one's end, once all are ready; and
    that end."""
    ids = [job.pk for job in jobs]
    wait_for(
        lambda: Job.objects.filter(pk__in=ids, status=Status.READY).count() == len(ids),
        timeout=timeout,
        what="the normal jobs to be ready",
    )
    rows = list(Job.objects.filter(pk__in=ids).values_list("created_at", "finished_at"))
    last = max(end for _, end in rows if end is not None)
    return (last - min(start for start, _ in rows)).total_seconds(), last


@pytest.mark.cluster
def test_a_job_that_kills_its_worker_fails_as_worker_lost_and_delays_nobody_much(
    processes: Processes, cluster_env: dict[str, str]
):
    start_platform(processes, cluster_env)
    # Six jobs of about 3 s on two workers: the batch outlasts the poison job's three attempts.
    count = 6
    makespan(run_batch(1, tenant="warmup"), timeout=60)  # the cluster is up and warm
    baseline, _ = makespan(run_batch(count, tenant="normal"), timeout=60)

    killer = job_create(kind=poison.KIND, tenant="poison", subject_id=str(uuid.uuid4()))
    with_poison, batch_end = makespan(run_batch(count, tenant="normal"), timeout=90)

    wait_for(
        lambda: Job.objects.get(pk=killer.pk).status in FINISHED, timeout=60, what="the poison job to end"
    )
    job = Job.objects.get(pk=killer.pk)
    limit = get_cause("worker_lost").rule.max_attempts
    assert (job.status, job.error_code, job.attempt) == (Status.FAILED, "worker_lost", limit), describe(job)
    runs = list(StageRun.objects.filter(job=job).order_by("started_at"))
    assert [run.outcome for run in runs] == [StageRun.Outcome.LOST] * limit, describe(job)
    assert len({run.worker_name for run in runs}) == limit, "each attempt killed a different worker process"
    transitions = list(
        JobEvent.objects.filter(job=job, kind="transition").values_list("name", "actor").order_by("id")
    )
    assert transitions.count(("mark_stalled", "reaper")) == limit
    assert transitions.count(("take_over", "reaper")) == limit - 1
    assert transitions[-1] == ("give_up", "reaper")
    # It stays failed: no further attempt, although q2 will deliver its killed tasks again.
    hold_for(3)  # time for a redelivered task to act, were it going to
    assert Job.objects.get(pk=job.pk).attempts_total == limit
    assert StageRun.objects.filter(job=job).count() == limit

    print(f"\nnormal jobs: {count} in {baseline:.1f}s alone, {with_poison:.1f}s beside the poison job")
    # The comparison means something only if the poison job kept killing while the batch ran.
    assert len([run for run in runs if run.started_at < batch_end]) >= limit - 1, "the poison ran too late"
    # Each attempt costs a worker restart (well under a second); it must not hold up the others.
    assert with_poison <= baseline * 1.25 + 2, (baseline, with_poison)
