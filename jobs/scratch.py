"""What workers that died on this machine left in its temp directory.

A stage's private temp directory is removed when the stage ends, but not when its worker is
SIGKILLed or the machine loses power. Temp directories live on the worker's own machine, so each
machine's workers sweep their own: a ``job-<id>-...`` directory whose job is no longer leased to
a live process of this machine is removed. The directories live in a folder of this deployment
(:func:`scratch_root`: named after its database, or ``JOBS_SCRATCH_DIR``): another deployment
sharing the machine's temp directory has jobs this database does not know, and its live runs'
directories looked orphaned here. Pipelines may register other leftovers by name pattern
with an age past which no live run can still use them (a native engine's temp files, say).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings

from jobs.models import LEASED, Job

log = logging.getLogger(__name__)

PREFIX = "job-"
_leftovers: dict[str, Callable[[], float]] = {}
_last_sweep = 0.0


def scratch_root() -> Path:
    """This deployment's folder for job temp directories (created private on first use)."""
    configured = settings.JOBS_SCRATCH_DIR
    root = Path(configured) if configured else Path(tempfile.gettempdir()) / f"jobs-{deployment_id()}"
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    return root


def deployment_id(db: dict[str, Any] | None = None) -> str:
    """Names this deployment by the database it uses (``db``: the default database's settings):
    the same on every process of it."""
    db = db if db is not None else settings.DATABASES["default"]
    # The backend by its last name: the web server's pooled PostgreSQL backend (config.postgresql)
    # and the workers' (django.db.backends.postgresql) are one deployment.
    engine = str(db.get("ENGINE") or "").rsplit(".", 1)[-1]
    identity = "|".join([engine, *(str(db.get(key) or "") for key in ("HOST", "PORT", "NAME"))])
    return hashlib.sha256(identity.encode()).hexdigest()[:12]


def register_leftover(pattern: str, max_age: Callable[[], float]) -> None:
    """Files matching ``pattern`` in the temp directory are removed once older than ``max_age()``
    seconds (a callable, so that it follows the settings)."""
    _leftovers[pattern] = max_age


def sweep_if_due() -> list[Path]:
    """:func:`sweep` at most once per ``JOBS_SCRATCH_SWEEP_SECONDS`` in this process."""
    global _last_sweep
    now = time.monotonic()
    if _last_sweep and now - _last_sweep < settings.JOBS_SCRATCH_SWEEP_SECONDS:
        return []
    _last_sweep = now
    try:
        return sweep()
    except Exception:  # housekeeping must never fail the task that triggered it
        log.exception("sweeping the temp directory failed")
        return []


def sweep(root: Path | None = None) -> list[Path]:
    """Remove what dead workers of this machine left: job directories in ``root`` (this
    deployment's :func:`scratch_root`) and registered leftovers (in ``root`` when given, else in
    the temp directory, where engines such as pytesseract write them; those go by age only)."""
    removed = [path for path in _orphaned_job_dirs(root or scratch_root()) if _remove(path)]
    now = time.time()
    leftovers_root = root or Path(tempfile.gettempdir())
    for pattern, max_age in _leftovers.items():
        limit = max_age()
        for path in leftovers_root.glob(pattern):
            if _age(path, now) > limit and _remove(path):
                removed.append(path)
    if removed:
        log.info("removed %d leftovers of dead workers from %s", len(removed), root)
    return removed


def _orphaned_job_dirs(root: Path) -> list[Path]:
    dirs: dict[Path, uuid.UUID] = {}
    for path in root.glob(f"{PREFIX}*"):
        try:
            dirs[path] = uuid.UUID(path.name[len(PREFIX) : len(PREFIX) + 36])
        except ValueError:
            continue  # not a job's directory
    if not dirs:
        return []
    holders = dict(
        Job.objects.filter(pk__in=set(dirs.values()), status__in=LEASED).values_list("pk", "worker_name")
    )
    return [path for path, job_id in dirs.items() if not _alive_here(holders.get(job_id, ""))]


def _alive_here(worker_name: str) -> bool:
    """Whether ``host:pid`` (a lease holder's name) is a live process of this machine."""
    host, _, pid = worker_name.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _age(path: Path, now: float) -> float:
    try:
        return now - path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def _remove(path: Path) -> bool:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    except FileNotFoundError:
        return False
    except OSError:
        log.warning("could not remove %s", path)
        return False
    return True
