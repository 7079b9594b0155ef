"""Formatting for the operator console: short ids, human durations, checkpoint summaries."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.utils.translation import gettext as _

from jobs.models import LEASED, Job

DASH = "—"


def short_id(pk: Any) -> str:
    """The first 8 hex digits of a job id: what lists and messages show (search accepts it)."""
    return str(pk).replace("-", "")[:8]


def short_subject(job: Job) -> str:
    """``1f2e3d4c… v2`` for a long (uuid) subject id, the id itself when it is short."""
    subject = job.subject_id if len(job.subject_id) <= 12 else f"{job.subject_id[:8]}…"
    return f"{subject} v{job.subject_version}"


def human_duration(seconds: float | None) -> str:
    """``42s``, ``3m 04s``, ``2h 05m``, ``3d 4h``; a dash for unknown."""
    if seconds is None:
        return DASH
    s = int(abs(seconds))
    if s < 60:
        text = f"{s}s"
    elif s < 3600:
        text = f"{s // 60}m {s % 60:02d}s"
    elif s < 86400:
        text = f"{s // 3600}h {s % 3600 // 60:02d}m"
    else:
        text = f"{s // 86400}d {s % 86400 // 3600}h"
    return f"-{text}" if seconds < 0 else text


def since(when: datetime | None, now: datetime) -> str:
    if when is None:
        return DASH
    return _("%(duration)s ago") % {"duration": human_duration((now - when).total_seconds())}


def lease_remaining(job: Job, now: datetime) -> str:
    """Time left on the lease of a leased job; how long ago it expired once it has."""
    if job.status not in LEASED or job.lease_expires_at is None:
        return DASH
    left = (job.lease_expires_at - now).total_seconds()
    if left >= 0:
        return human_duration(left)
    return _("expired %(duration)s ago") % {"duration": human_duration(-left)}


def checkpoint_summary(checkpoint: dict[str, Any] | None, limit: int = 60) -> str:
    """``next=4, engine=tesseract``: where a resumable stage would carry on."""
    if not checkpoint:
        return DASH
    text = ", ".join(f"{key}={value}" for key, value in checkpoint.items())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str) if value else DASH
