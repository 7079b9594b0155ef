"""What a sync does, stage by stage (the ``document.sync`` kind, ``documents/kinds/sync.py``).

- **list**: the source's items with their change markers, saved on the sync row.
- **compare**: each listed item against its :class:`SourceItem` row, by marker first and then, if
  the marker moved, by content hash: new, changed, unchanged (a moved marker with the same bytes
  only records the new marker), removed. The plan and its counts are saved on the sync row.
- **apply**: each planned item through the normal services: a new document (``document_upload``:
  checks, dedup, the collection's access), a new version of the item's document (the published
  one serves until the new one publishes), or a delete (``document_delete``, with its audit
  record) or, under the keep policy, the item marked removed. Unchanged items cost nothing.

Each item's apply is one transaction that also writes its item row, after checking the sync's
lease inside it, so a sync interrupted anywhere and run again finds what was applied (the item's
marker is the current one) and applies the rest once; the checkpoint only says where to resume.
When the job finishes, ``documents/sources/finish.py`` records the counts and the batch.
"""

# long-module: the three stages share the item-row bookkeeping that makes a sync resumable; split,
# each would carry a copy of the lease and record helpers.

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from django.db import IntegrityError, transaction
from django.utils import timezone

from documents.causes import SOURCE_GONE, SYNC_QUEUE_FULL, SYNC_RUNNING
from documents.engines.validation import UploadRejected
from documents.models import Document
from documents.principals import Viewer
from documents.services.access import AccessInputError, check_principals, documents_access_set
from documents.services.delete import document_delete
from documents.services.upload import UploadResult, document_upload
from documents.services.upload_quotas import QUOTA_EXCEEDED
from documents.sources.connectors import LISTING_FAILURES, Connector, Listed, Paced, Refused
from documents.sources.credentials import credentials_of
from documents.sources.models import Source, SourceItem, SourceSync
from documents.sources.registry import kind_of
from jobs.errors import LeaseLost, StageFailure
from jobs.models import LEASED, Job

if TYPE_CHECKING:
    from jobs.context import StageContext

NEW, CHANGED, REMOVED, UNCHANGED, FAILED, FORGET = (
    "new",
    "changed",
    "removed",
    "unchanged",
    "failed",
    "forget",
)
COUNT_KEYS = ("found", NEW, CHANGED, REMOVED, UNCHANGED, FAILED)
PROGRESS_EVERY = 200
# How often a pause looks at the flags a cancel, a lost lease or the stage deadline set.
PAUSE_STEP = 0.05


def _load(ctx: StageContext) -> tuple[SourceSync, Source]:
    sync = (
        SourceSync.objects.select_related("source__tenant", "source__collection")
        .filter(pk=ctx.input["sync_id"])
        .first()
    )
    if sync is None:
        raise StageFailure(SOURCE_GONE.code, "the source (and its sync) was removed")
    if sync.finished_at is not None:
        # Run again after a failure (a retry, at the stage that failed): open again, unless
        # another sync of the source opened since (the partial unique constraint says so).
        try:
            with transaction.atomic():
                SourceSync.objects.filter(pk=sync.pk).update(finished_at=None)
        except IntegrityError:
            raise StageFailure(SYNC_RUNNING.code, "another sync of the source is running") from None
    return sync, sync.source


def _connect(source: Source, ctx: StageContext) -> Connector:
    """The source opened for this stage; the sync fails with the kind's "unavailable" cause when
    it cannot be reached or is no longer allowed."""
    kind = kind_of(source.kind)
    try:
        connector = kind.connect(source, credentials_of(source))
    except Refused as refused:
        raise StageFailure(kind.unavailable.code, f"source refused: {refused.code}") from None
    if isinstance(connector, Paced):
        connector.use_pause(_pause_of(ctx))
    return connector


def _pause_of(ctx: StageContext) -> Callable[[float], None]:
    """A wait that is a safe point all along: a cancel (set by the heartbeat thread) ends it at
    once with :class:`~jobs.errors.CancelRequested`; a lost lease or the stage deadline within
    :data:`PAUSE_STEP`. No transaction is open while it waits."""

    def pause(seconds: float) -> None:
        until = time.monotonic() + seconds
        while (left := until - time.monotonic()) > 0:
            ctx.check()
            ctx.cancel_requested.wait(min(left, PAUSE_STEP))
        ctx.check()

    return pause


def _hold_lease(ctx: StageContext) -> None:
    """Inside an item's transaction: lock the sync's job row if this worker still holds its lease
    (so a takeover waits for this item to commit, and a worker that lost the job applies nothing)."""
    held = list(
        Job.objects.select_for_update(no_key=True)
        .filter(pk=ctx.job_id, worker_token=ctx.token, status__in=LEASED)
        .values_list("pk", flat=True)
    )
    if not held:
        raise LeaseLost(job_id=ctx.job_id)


def sync_list(ctx: StageContext) -> None:
    """Stage ``list``: every item of the source with its marker, on the sync row."""
    sync, source = _load(ctx)
    connector = _connect(source, ctx)
    listing: list[list[str]] = []
    for entry in connector.listing():
        if len(listing) % PROGRESS_EVERY == 0:
            ctx.check()
            ctx.progress(len(listing))
        listing.append([entry.key, entry.marker] if isinstance(entry, Listed) else list(entry))
    with ctx.write(checkpoint={}, done=len(listing), total=len(listing)):
        SourceSync.objects.filter(pk=sync.pk).update(listing=listing, plan=[], counts={})


def sync_compare(ctx: StageContext) -> None:
    """Stage ``compare``: the plan, by marker and then content hash (only of items whose marker
    moved: an unchanged source costs one stat per item and no read)."""
    sync, source = _load(ctx)
    connector = _connect(source, ctx)
    known = {
        key: (marker, sha, document_id, deleted_at is None, removed_at)
        for key, marker, sha, document_id, deleted_at, removed_at in SourceItem.objects.filter(
            source=source
        ).values_list("key", "marker", "sha256", "document_id", "document__deleted_at", "removed_at")
    }
    plan: list[list[str]] = []
    touched: dict[str, str] = {}  # key -> new marker: the same bytes under a new marker
    total = len(sync.listing)
    for done, (key, marker) in enumerate(sync.listing):
        if done % PROGRESS_EVERY == 0:
            ctx.check()
            ctx.progress(done, total)
        if marker in LISTING_FAILURES:
            plan.append([key, FAILED, marker])
            continue
        old = known.get(key)
        if old is None or old[2] is None or not old[3]:
            plan.append([key, NEW, marker])  # never applied, or its document was deleted since
        elif old[0] == marker and old[4] is None:
            plan.append([key, UNCHANGED, marker])
        else:
            # A digest reads the item (over the network, for a web page): each is a safe point and
            # counts as progress, so a slow source never looks stuck nor outlives a cancel.
            ctx.check()
            ctx.progress(done, total)
            try:
                same = connector.digest(key) == old[1]
            except (OSError, Refused):
                continue  # gone (or turned into a link out) since the listing: next sync sees it
            plan.append([key, UNCHANGED if same else CHANGED, marker])
            if same:
                touched[key] = marker
    listed = {key for key, _ in sync.listing}
    for key, (_m, _s, document_id, live, removed_at) in known.items():
        if key in listed:
            continue
        if document_id is not None and live and removed_at is None:
            plan.append([key, REMOVED, ""])
        elif document_id is None or not live:
            plan.append([key, FORGET, ""])  # a failure or a deleted document's row: nothing to keep
    counts = planned_counts(plan, found=total)
    with ctx.write(checkpoint={"next": 0}, done=total, total=total):
        SourceSync.objects.filter(pk=sync.pk).update(plan=plan, counts=counts)
        for key, marker in touched.items():
            SourceItem.objects.filter(source=source, key=key).update(
                marker=marker, removed_at=None, updated_at=timezone.now()
            )


def planned_counts(plan: list[list[str]], *, found: int) -> dict[str, int]:
    counts = {key: 0 for key in COUNT_KEYS}
    counts["found"] = found
    for _key, action, *_ in plan:
        if action in counts:
            counts[action] += 1
    return counts


def sync_apply(ctx: StageContext) -> None:
    """Stage ``apply``: each planned item once, from the checkpoint on."""
    sync, source = _load(ctx)
    connector = _connect(source, ctx)
    todo = [entry for entry in sync.plan if entry[1] != UNCHANGED]
    start = int(ctx.checkpoint.get("next", 0))
    if not todo:
        ctx.skip()
        return
    for index in range(start, len(todo)):
        ctx.check()
        key, action = todo[index][0], todo[index][1]
        if action in (NEW, CHANGED):
            _apply_upload(ctx, sync, source, connector, key)
        elif action == REMOVED:
            _apply_removal(ctx, sync, source, connector, key)
        elif action == FAILED:
            code, message = LISTING_FAILURES[todo[index][2]]
            with ctx.write():
                _record_failure(sync, source, key, code, message)
        elif action == FORGET:
            with ctx.write():
                SourceItem.objects.filter(source=source, key=key).delete()
        with ctx.write(checkpoint={"next": index + 1}, done=index + 1, total=len(todo)):
            pass


def _apply_upload(
    ctx: StageContext, sync: SourceSync, source: Source, connector: Connector, key: str
) -> None:
    """A new document of the item, or a new version of its document, with its item row."""
    item = SourceItem.objects.select_related("document").filter(source=source, key=key).first()
    try:
        with connector.fetch(key) as fetched:
            marker = fetched.marker
            document: Document | None = None
            if item is not None and item.document is not None and item.document.deleted_at is None:
                if item.marker == marker and item.removed_at is None:
                    return  # applied already (this sync, interrupted after the item's commit, or since)
                document = item.document
            action = CHANGED if document is not None else NEW
            access = check_principals(source.tenant, fetched.access) if fetched.access is not None else None

            def recorded(result: UploadResult) -> None:
                _hold_lease(ctx)
                if document is not None:
                    _set_access(source, result.document, access)
                _record(sync, source, key, marker, result, action)

            result = document_upload(
                tenant=source.tenant,
                data=fetched.stream,
                filename=fetched.filename,
                user=source.created_by,
                document=document,
                collection=source.collection if document is None else None,
                access=access if document is None else None,
                recorded=recorded,
            )
    except AccessInputError as refused:  # the item's access metadata names no principal of ours
        with ctx.write():
            _record_failure(sync, source, key, refused.code, str(refused.message))
        return
    except Refused as refused:
        with ctx.write():
            _record_failure(sync, source, key, refused.code, refused.message)
        return
    except UploadRejected as refused:
        if str(refused.code) == QUOTA_EXCEEDED:
            # Not the item's fault: the workspace's queue is full (often of this sync's own
            # documents). The stage stops here, freeing the worker for them, and is retried
            # after a delay from this item on (its checkpoint).
            raise StageFailure(SYNC_QUEUE_FULL.code, "the workspace's queue is full") from None
        with ctx.write():
            _record_failure(sync, source, key, str(refused.code), str(refused.message))
        return
    except OSError:
        return  # gone since the listing, or while it was read: the next sync sees it
    if result.duplicate:  # the published version has these bytes already: only the marker moved
        with ctx.write():
            _set_access(source, result.document, access)
            _record(sync, source, key, marker, result, UNCHANGED)


def _set_access(source: Source, document: Document, access: list[str] | None) -> None:
    """The document's own list as the item's metadata gives it now (``None``: it gives none, the
    list stays), through the access service (grants and audit record), inside the caller's
    transaction. Recorded as changed by the source's creator."""
    if access is None or document.access == access:
        return
    system = Viewer(tenant_id=source.tenant_id, user_id=None, keys=(), is_admin=True)
    documents_access_set(
        viewer=system, documents=[document], inherit=False, principals=access, user=source.created_by
    )


def _record(
    sync: SourceSync, source: Source, key: str, marker: str, result: UploadResult, action: str
) -> None:
    SourceItem.objects.update_or_create(
        source=source,
        key=key,
        defaults={
            "marker": marker,
            "sha256": result.version.sha256,
            "document_id": result.document.pk,
            "last_sync": sync,
            "last_action": action,
            "job": result.job if action != UNCHANGED else None,
            "error_code": "",
            "error_message": "",
            "removed_at": None,
            "updated_at": timezone.now(),
        },
    )


def _record_failure(sync: SourceSync, source: Source, key: str, code: str, message: str) -> None:
    """The item's failure, its marker left as it was: the next sync tries it again."""
    SourceItem.objects.update_or_create(
        source=source,
        key=key,
        defaults={
            "last_sync": sync,
            "last_action": FAILED,
            "job": None,
            "error_code": code[:40],
            "error_message": message[:300],
            "updated_at": timezone.now(),
        },
    )


def _apply_removal(
    ctx: StageContext, sync: SourceSync, source: Source, connector: Connector, key: str
) -> None:
    """The item's document deleted (with its audit record), or kept and the item marked removed."""
    if connector.exists(key):
        return  # back since the listing: the next sync compares it again
    with ctx.write():
        # The item row is the lock: a second run of this sync finds it applied and stops here.
        item = SourceItem.objects.select_for_update().filter(source=source, key=key).first()
        if item is None or item.removed_at is not None or item.document_id is None:
            return
        if source.on_removal == Source.OnRemoval.KEEP:
            SourceItem.objects.filter(pk=item.pk).update(
                removed_at=timezone.now(),
                last_sync=sync,
                last_action=REMOVED,
                job=None,
                updated_at=timezone.now(),
            )
            return
        document_delete(tenant=source.tenant, document_id=item.document_id, via="source")
        SourceItem.objects.filter(pk=item.pk).delete()
