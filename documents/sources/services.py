"""Use cases of sources (docs/sources.md): create, change and remove a source, and start a sync.

Who may do what is the caller's business (the API lets workspace admins manage sources and
every member read them); these functions check what a source may be: settings its kind accepts
(``documents/sources/registry.py``: a folder under an allowed root, ...), a collection of the
source's own workspace. Credentials are stored encrypted and never returned.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from typing import Any

from croniter import croniter
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils.translation import gettext_noop

from documents import credentials as secrets
from documents.kinds import SYNC as KIND
from documents.models import Collection, Tenant
from documents.sources.connectors import Refused
from documents.sources.credentials import credentials_of, seal
from documents.sources.models import Source, SourceSync
from documents.sources.registry import kind_of
from documents.sources.schedules import schedule_remove, schedule_save
from jobs.errors import JobConflict
from jobs.models import Actor
from jobs.quotas import QueueFull
from jobs.services.lifecycle import job_cancel, job_create

MAX_SCHEDULE_MINUTES = 60 * 24 * 31


class SourceRefused(Exception):
    """Bad input for a source use case, with a user-safe code, message, HTTP status and the
    field it is about (if one)."""

    def __init__(self, status: int, code: str, message: str, field: str = "") -> None:
        super().__init__(message)
        self.http_status = status
        self.code = code
        self.message = message
        self.field = field


def _bad(refused: Refused) -> SourceRefused:
    return SourceRefused(400, refused.code, refused.message, refused.field)


def check_config(kind: str, config: Any) -> dict[str, Any]:
    """A kind's settings as stored (for a folder, ``{"path": <the path as given>}`` once it
    resolves under an allowed root)."""
    try:
        return kind_of(kind).clean_config(config)
    except Refused as refused:
        raise _bad(refused) from None


def check_credentials(kind: str, given: Any, stored: dict[str, str] | None = None) -> str:
    """The kind's secrets from ``given`` (and what is ``stored``, for a change), as stored."""
    try:
        return seal(kind_of(kind).clean_credentials(given, stored or {}))
    except Refused as refused:
        raise _bad(refused) from None


def _check_name(name: Any) -> str:
    text = str(name or "").strip()
    if not text:
        raise SourceRefused(400, "invalid_name", gettext_noop("A source needs a name."), "name")
    return text[:200]


def _check_schedule(minutes: Any) -> int | None:
    if minutes is None:
        return None
    if not isinstance(minutes, int) or isinstance(minutes, bool) or not 1 <= minutes <= MAX_SCHEDULE_MINUTES:
        raise SourceRefused(
            400,
            "invalid_schedule",
            gettext_noop("The schedule is a number of minutes between 1 and 44640, or empty."),
            "schedule_minutes",
        )
    return minutes


def _check_cron(expression: Any) -> str:
    """A 5-field cron expression as stored ("" for none), checked with croniter."""
    if expression is None or expression == "":
        return ""
    text = " ".join(str(expression).split()) if isinstance(expression, str) else ""
    if len(text.split(" ")) != 5 or len(text) > 100 or not croniter.is_valid(text):
        raise SourceRefused(
            400,
            "invalid_schedule",
            gettext_noop(
                "The cron schedule is five fields (minute hour day-of-month month day-of-week), "
                "such as 0 3 * * 1-5, or empty."
            ),
            "schedule_cron",
        )
    return text


def _check_one_schedule(minutes: int | None, cron: str) -> None:
    if minutes and cron:
        raise SourceRefused(
            400,
            "invalid_schedule",
            gettext_noop("Give either schedule_minutes or schedule_cron, not both (set the other empty)."),
            "schedule_cron",
        )


def _check_on_removal(value: Any) -> str:
    if value not in Source.OnRemoval.values:
        raise SourceRefused(
            400, "invalid_on_removal", gettext_noop("On removal is delete or keep."), "on_removal"
        )
    return str(value)


def source_create(
    *,
    tenant: Tenant,
    collection: Collection,
    name: str,
    kind: str = Source.Kind.FOLDER,
    config: dict[str, Any],
    credentials: dict[str, Any] | None = None,
    on_removal: str = Source.OnRemoval.DELETE,
    schedule_minutes: int | None = None,
    schedule_cron: str | None = None,
    user: Any = None,
) -> Source:
    """A new source of ``collection`` (of ``tenant``); nothing is synced until asked or scheduled."""
    if collection.tenant_id != tenant.pk:
        raise ValueError("the collection belongs to another tenant")
    fields = {
        "name": _check_name(name),
        "config": check_config(kind, config),
        "credentials": check_credentials(kind, credentials),
        "on_removal": _check_on_removal(on_removal),
        "schedule_minutes": _check_schedule(schedule_minutes),
        "schedule_cron": _check_cron(schedule_cron),
    }
    _check_one_schedule(_check_schedule(schedule_minutes), _check_cron(schedule_cron))

    with transaction.atomic():
        source = Source.objects.create(
            tenant=tenant,
            collection=collection,
            kind=kind,
            created_by=user if isinstance(user, get_user_model()) else None,
            **fields,
        )
        schedule_save(source)  # the scheduler's row commits with the source
    return source


def source_update(*, source: Source, **changes: Any) -> Source:
    """Change a source's name, settings, credentials, removal policy or schedule (the others
    stay; a credential left out of ``credentials`` keeps its stored value). New settings apply
    from the next sync on; the items already synced are compared with them."""
    fields: dict[str, Any] = {}
    if "name" in changes:
        fields["name"] = _check_name(changes["name"])
    if "config" in changes:
        fields["config"] = check_config(source.kind, changes["config"])
    if "credentials" in changes:
        try:
            stored = credentials_of(source)
        except Refused:
            stored = {}  # unreadable: what is given now replaces it
        fields["credentials"] = check_credentials(source.kind, changes["credentials"], stored)
    if "on_removal" in changes:
        fields["on_removal"] = _check_on_removal(changes["on_removal"])
    if "schedule_minutes" in changes:
        fields["schedule_minutes"] = _check_schedule(changes["schedule_minutes"])
    if "schedule_cron" in changes:
        fields["schedule_cron"] = _check_cron(changes["schedule_cron"])
    _check_one_schedule(
        fields.get("schedule_minutes", source.schedule_minutes),
        fields.get("schedule_cron", source.schedule_cron),
    )
    if not fields:
        return source
    with transaction.atomic():
        Source.objects.filter(pk=source.pk).update(**fields)
        source.refresh_from_db()
        if "schedule_minutes" in fields or "schedule_cron" in fields:
            schedule_save(source)  # the scheduler's row commits with the source
    return source


def source_delete(*, source: Source, actor_name: str = "") -> None:
    """Remove a source, its items and its syncs' records; the documents it made stay in their
    collection. A running sync is cancelled first (it stops at its next safe point)."""
    running = SourceSync.objects.filter(source=source, finished_at=None).values_list("job_id", flat=True)
    for job_id in list(running):
        # Finished or stalled meanwhile: the source's removal ends it either way.
        with contextlib.suppress(JobConflict):
            job_cancel(job_id=job_id, actor=Actor.USER, actor_name=actor_name, reason="source removed")

    source_id = source.pk
    Source.objects.filter(pk=source_id).delete()
    schedule_remove(source_id)


@dataclass(frozen=True)
class SyncStarted:
    sync: SourceSync
    # False: a sync of the source was running already; this is that one.
    created: bool


def sync_start(*, source: Source, actor: Actor = Actor.USER, actor_name: str = "") -> SyncStarted:
    """Start a sync of ``source``, or answer the one that is unfinished (a second "sync now"
    while one runs is that sync, not another). A source its kind's quick check refuses (a folder
    no longer allowed, ...) is refused here (400), before any job is made."""
    try:
        kind_of(source.kind).check_now(source)
    except Refused as refused:
        raise _bad(refused) from None
    try:
        with transaction.atomic():
            # The source row is the lock: two "sync now" calls at once make one sync; the partial
            # unique constraint on open syncs holds it for every other way in.
            Source.objects.select_for_update().filter(pk=source.pk).first()
            running = _open_sync(source)
            if running is not None:
                return SyncStarted(running, created=False)
            sync_id = uuid.uuid4()
            job = job_create(
                kind=KIND,
                tenant=source.tenant.slug,
                subject_id=str(source.pk),
                subject_version=SourceSync.objects.filter(source=source).count() + 1,
                payload={"source_id": str(source.pk), "sync_id": str(sync_id)},
                actor=actor,
                actor_name=actor_name,
                reason="sync",
            )
            sync = SourceSync.objects.create(id=sync_id, source=source, job=job)
    except IntegrityError:
        running = _open_sync(source)  # another process's start won: answer that one
        if running is None:
            raise
        return SyncStarted(running, created=False)
    except QueueFull:
        raise SourceRefused(
            429, "quota_exceeded", gettext_noop("The workspace's queue is full. Try again later.")
        ) from None
    return SyncStarted(sync, created=True)


def _open_sync(source: Source) -> SourceSync | None:
    return SourceSync.objects.filter(source=source, finished_at=None).select_related("job").first()


def source_credentials_reencrypt() -> tuple[int, int]:
    """Encrypt every source's credentials again with the current ``SECRET_KEY`` (after a
    rotation); ``(done, unreadable)``."""
    return secrets.reencrypt_rows(Source.objects.all(), "credentials")
