"""Scheduled syncs through django-q2's scheduler: one ``Schedule`` row per source with a
schedule, named after it, running :func:`documents.sources.tasks.sync_scheduled` every N
minutes (``MINUTES``) or at the times of the source's cron expression (``CRON``, the
scheduler computes each next run with croniter in the server's time zone). A scheduled sync is
started like "sync now": when one is still running, nothing new."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from croniter import croniter
from django.utils import timezone
from django_q.models import Schedule

from documents.sources.models import Source

TASK = "documents.sources.tasks.sync_scheduled"


def schedule_name(source_id: Any) -> str:
    return f"source-sync-{source_id}"


def next_cron_time(expression: str) -> datetime:
    """The next time of a cron expression after now, in the server's time zone (as the
    scheduler computes it)."""
    next_time: datetime = croniter(expression, timezone.localtime()).get_next(datetime)
    return next_time


def schedule_save(source: Source) -> None:
    """Create, change or remove the source's schedule to match its ``schedule_minutes`` or
    ``schedule_cron``."""
    minutes, cron = source.schedule_minutes, source.schedule_cron
    if not minutes and not cron:
        schedule_remove(source.pk)
        return
    existing = Schedule.objects.filter(name=schedule_name(source.pk)).first()
    if cron:
        if existing is not None and existing.schedule_type == Schedule.CRON and existing.cron == cron:
            return
        timing = {
            "schedule_type": Schedule.CRON,
            "cron": cron,
            "minutes": None,
            "next_run": next_cron_time(cron),
        }
    else:
        assert minutes is not None
        if (
            existing is not None
            and existing.schedule_type == Schedule.MINUTES
            and existing.minutes == minutes
        ):
            return
        timing = {
            "schedule_type": Schedule.MINUTES,
            "cron": None,
            "minutes": minutes,
            "next_run": timezone.now() + timedelta(minutes=minutes),
        }
    Schedule.objects.update_or_create(
        name=schedule_name(source.pk),
        defaults={"func": TASK, "args": repr(str(source.pk)), "repeats": -1, **timing},
    )


def schedule_remove(source_id: Any) -> None:
    Schedule.objects.filter(name=schedule_name(source_id)).delete()


def next_run(source: Source) -> datetime | None:
    """When the scheduler starts the source's next sync (None: no schedule)."""
    if not source.schedule_minutes and not source.schedule_cron:
        return None
    return Schedule.objects.filter(name=schedule_name(source.pk)).values_list("next_run", flat=True).first()
