"""The parsing sandbox on a real django-q2 cluster: a parser spinning in C (lexbor building the
tree of 200,000 nested ``<div>``, quadratic in the depth) no longer holds its worker.

While the sandbox child spins, the worker's lease keeps being renewed (heartbeats observed),
another tenant's small document becomes ready on the other worker, and a cancel ends the job
within seconds and kills the child; a call over its wall time is a ``parse_timeout``. In the
worker itself the parse could not be interrupted: lexbor releases the GIL, so heartbeats went on,
but the handler reached no safe point, so a cancel waited for the whole parse (minutes), and a
regex over a hostile line held the GIL too, stopping the heartbeats.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest
from pytest_django.fixtures import Settings as DjangoSettings

from jobs.models import Job, Status
from jobs.services.lifecycle import job_cancel
from tests.conftest import Processes, wait_for
from tests.documents.helpers import make_tenant, upload
from tests.reliability import corpus
from tests.reliability.helpers import alive, sandbox_readers
from tests.reliability.test_hostile_inputs import describe, start_platform

# The sandbox's walls on a real cluster: the same on either database, run in the SQLite pass only.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.cluster, pytest.mark.database_neutral]

# Without the nesting limit, so that the parser really spins (the limit refuses this file at once).
SPINNING = {"DOCUMENTS_MAX_HTML_DEPTH": "10000000", "JOBS_LEASE_SECONDS": "3"}


def sandbox_cluster_env(
    subprocess_env: dict[str, str], settings: DjangoSettings, tmp_path: Path, **extra: str
) -> dict[str, str]:
    """A cluster's environment: this test's media and temp folders, quick stuck-exit and
    re-dispatch, plus ``extra``."""
    settings.MEDIA_ROOT = tmp_path / "media"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    return {
        **subprocess_env,
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "TMPDIR": str(scratch),
        "JOBS_STUCK_EXIT_SECONDS": "2",
        "JOBS_REDISPATCH_AFTER": "5",
        **extra,
    }


@pytest.fixture
def cluster_env(subprocess_env: dict[str, str], settings: DjangoSettings, tmp_path: Path) -> dict[str, str]:
    return sandbox_cluster_env(subprocess_env, settings, tmp_path)


def responsive_while_spinning_then_cancelled(
    hostile: Job, *, stage: str, spinning: int, what: str, small_timeout: float
) -> None:
    """While the process ``spinning`` holds ``hostile``'s stage: its worker keeps heartbeating,
    another tenant's small document becomes ready, and a cancel ends the job and kills it."""
    first = Job.objects.get(pk=hostile.pk).heartbeat_at
    wait_for(
        lambda: Job.objects.get(pk=hostile.pk).heartbeat_at != first,
        timeout=10,
        what=f"a heartbeat while {what} spins",
    )
    small = upload(make_tenant("other"), b"Small harbor note from another tenant.", "small.txt").job
    assert small is not None
    wait_for(
        lambda: Job.objects.get(pk=small.pk).status == Status.READY,
        timeout=small_timeout,
        what="another tenant's small document to become ready",
    )
    assert alive(spinning), f"{what} ended before the other job was through"
    job = Job.objects.get(pk=hostile.pk)
    assert (job.status, job.stage, job.attempt) == (Status.RUNNING, stage, 1), describe(job)

    job_cancel(job_id=hostile.pk, actor_name="test")
    wait_for(
        lambda: Job.objects.get(pk=hostile.pk).status == Status.CANCELLED,
        timeout=15,
        what=f"the cancel to finish while {what} spins",
    )
    wait_for(lambda: not alive(spinning), timeout=10, what=f"{what} to be killed")


def spinning_job(processes: Processes, env: dict[str, str]) -> tuple[int, Job, int]:
    cluster = start_platform(processes, env)
    hostile = upload(make_tenant("hostile"), corpus.nested_html(200_000), "deep.html").job
    assert hostile is not None
    wait_for(
        lambda: Job.objects.get(pk=hostile.pk).status == Status.RUNNING and sandbox_readers(cluster.pid),
        timeout=60,
        what="the hostile file's parser to start in a sandbox child",
    )
    (child,) = sandbox_readers(cluster.pid)
    return cluster.pid, hostile, child


def test_a_spinning_parser_leaves_its_worker_responsive_and_dies_on_cancel(
    processes: Processes, cluster_env: dict[str, str]
) -> None:
    cluster, hostile, child = spinning_job(processes, {**cluster_env, **SPINNING})
    try:
        responsive_while_spinning_then_cancelled(
            hostile, stage="parsing", spinning=child, what="the hostile parser", small_timeout=60
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(cluster, signal.SIGKILL)


def test_a_parser_over_its_wall_time_fails_as_parse_timeout(
    processes: Processes, cluster_env: dict[str, str]
) -> None:
    env = {**cluster_env, **SPINNING, "DOCUMENTS_SANDBOX_WALL_SECONDS": "3"}
    cluster, hostile, child = spinning_job(processes, env)
    try:
        wait_for(
            lambda: Job.objects.get(pk=hostile.pk).status == Status.FAILED,
            timeout=60,
            what="the parse timeout (two attempts of 3 s and a retry delay)",
        )
        job = Job.objects.get(pk=hostile.pk)
        assert (job.error_code, job.stage, job.attempt) == ("parse_timeout", "parsing", 2), describe(job)
        assert not alive(child)
        assert sandbox_readers(cluster) == [] or all(pid != child for pid in sandbox_readers(cluster))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(cluster, signal.SIGKILL)
