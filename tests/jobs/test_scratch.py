"""Sweeping what dead workers of this machine left in the temp directory."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from jobs import scratch
from jobs.models import Job
from jobs.services.worker import job_claim
from tests.jobs.helpers import new_job

pytestmark = pytest.mark.django_db


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def leased_to(worker: str) -> Job:
    claim = job_claim(job_id=new_job().pk, worker=worker)
    assert claim is not None
    return claim.job


def job_dir(root: Path, job_id: object, suffix: str = "x") -> Path:
    path = root / f"job-{job_id}-{suffix}"
    path.mkdir()
    (path / "upload.pdf").write_bytes(b"%PDF-")
    return path


def test_only_directories_of_jobs_no_live_process_of_this_machine_holds_are_removed(tmp_path: Path):
    here = socket.gethostname()
    live = job_dir(tmp_path, leased_to(f"{here}:{os.getpid()}").pk)
    dead = job_dir(tmp_path, leased_to(f"{here}:{dead_pid()}").pk)
    elsewhere = job_dir(tmp_path, leased_to(f"another-machine:{os.getpid()}").pk)
    finished = job_dir(tmp_path, new_job().pk)  # queued: nobody holds it
    unknown = job_dir(tmp_path, uuid.uuid4())  # a job that no longer exists
    not_a_job = tmp_path / "job-notes"
    not_a_job.mkdir()
    other = tmp_path / "report.txt"
    other.write_text("not ours")

    removed = scratch.sweep(tmp_path)

    assert sorted(removed) == sorted([dead, elsewhere, finished, unknown])
    assert live.exists() and not_a_job.exists() and other.exists()
    assert not any(path.exists() for path in removed)


def test_registered_leftovers_go_only_once_older_than_their_age(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(scratch, "_leftovers", {})
    scratch.register_leftover("tess_*", lambda: 600)
    old, fresh = tmp_path / "tess_a_input.PNG", tmp_path / "tess_b_input.PNG"
    for path in (old, fresh):
        path.write_bytes(b"png")
    os.utime(old, (time.time() - 601, time.time() - 601))

    assert scratch.sweep(tmp_path) == [old]
    assert fresh.exists() and not old.exists()


def test_the_sweep_runs_at_most_once_per_interval_in_a_process(tmp_path: Path, monkeypatch, settings):
    monkeypatch.setattr(scratch, "_last_sweep", 0.0)
    monkeypatch.setattr(scratch.tempfile, "gettempdir", lambda: str(tmp_path))
    settings.JOBS_SCRATCH_SWEEP_SECONDS = 300
    first = job_dir(scratch.scratch_root(), uuid.uuid4(), "first")
    assert scratch.sweep_if_due() == [first]
    second = job_dir(scratch.scratch_root(), uuid.uuid4(), "second")
    assert scratch.sweep_if_due() == []
    assert second.exists()


def test_another_deployments_job_directories_are_not_swept(tmp_path: Path, monkeypatch, settings):
    """Two deployments on one machine share the temp directory: each sweeps only its own folder,
    named after its database (the other's live jobs are unknown here and looked orphaned)."""
    monkeypatch.setattr(scratch.tempfile, "gettempdir", lambda: str(tmp_path))
    ours = scratch.scratch_root()
    assert ours.parent == tmp_path and ours.name == f"jobs-{scratch.deployment_id()}"
    other_root = tmp_path / "jobs-0123456789ab"
    other_root.mkdir()
    theirs = job_dir(other_root, uuid.uuid4())  # a live job of the other deployment's database
    mine = job_dir(ours, uuid.uuid4())  # unknown here: orphaned

    assert scratch.sweep() == [mine]
    assert theirs.exists()
    another = {**settings.DATABASES["default"], "NAME": "another-database"}
    assert scratch.deployment_id(another) != scratch.deployment_id()


def test_the_web_servers_pooled_backend_is_the_same_deployment() -> None:
    """The web server's PostgreSQL backend (config.postgresql, for its pool) and the workers'
    (Django's) name one database: both sweep the same scratch folder."""
    workers = {"ENGINE": "django.db.backends.postgresql", "HOST": "db", "PORT": 5432, "NAME": "ingest"}
    web = {**workers, "ENGINE": "config.postgresql"}
    assert scratch.deployment_id(web) == scratch.deployment_id(workers)
    assert scratch.deployment_id(
        {**workers, "ENGINE": "django.db.backends.sqlite3"}
    ) != scratch.deployment_id(workers)
