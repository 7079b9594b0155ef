"""Scheduled syncs through django-q2's scheduler: one ``Schedule`` row per source with a
schedule, named after it, running :func:`documents.sources.tasks.sync_scheduled` every N
minutes. A scheduled sync is started like "sync now": when one is still running, nothing new."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone
from django_q.models import Schedule

from documents.sources.models import Source

TASK = "documents.sources.tasks.sync_scheduled"


def schedule_name(source_id: Any) -> str:
    return f"source-sync-{source_id}"


def schedule_save(source: Source) -> None:
    """Create, change or remove the source's schedule to match its ``schedule_minutes``."""
    if not source.schedule_minutes:
        schedule_remove(source.pk)
        return
    minutes = source.schedule_minutes
    existing = Schedule.objects.filter(name=schedule_name(source.pk)).first()
    if existing is not None and existing.minutes == minutes:
        return
    Schedule.objects.update_or_create(
        name=schedule_name(source.pk),
        defaults={
            "func": TASK,
            "args": repr(str(source.pk)),
            "schedule_type": Schedule.MINUTES,
            "minutes": minutes,
            "repeats": -1,
            "next_run": timezone.now() + timedelta(minutes=minutes),
        },
    )


def schedule_remove(source_id: Any) -> None:
    Schedule.objects.filter(name=schedule_name(source_id)).delete()


def next_run(source: Source) -> datetime | None:
    """When the scheduler starts the source's next sync (None: no schedule)."""
    if not source.schedule_minutes:
        return None
    return Schedule.objects.filter(name=schedule_name(source.pk)).values_list("next_run", flat=True).first()
