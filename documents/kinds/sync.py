"""The source sync job kind (``document.sync``), registered with the job engine from outside it.

Stages: ``list`` (the source's items and their change markers), ``compare`` (the plan: new,
changed, removed, unchanged, by marker and then content hash) and ``apply`` (each planned item
through the upload, new-version and delete services, one transaction per item with its item row;
resumable from the checkpoint, and an item applied before an interruption is found applied).
``documents/sources/sync.py`` does the work; the ``on_finish`` hook records the counts, makes
the sync's documents a batch and sends ``source.synced``. A cancel or failure leaves the items
applied so far as they are: each is a finished upload, version or delete of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from documents.causes import (
    BUCKET_UNAVAILABLE,
    FOLDER_UNAVAILABLE,
    SOURCE_GONE,
    SYNC_QUEUE_FULL,
    SYNC_RUNNING,
    WEB_TOO_SLOW,
    WEB_UNAVAILABLE,
)
from documents.kinds import SYNC
from jobs import pipelines
from jobs.errors import _ as _
from jobs.pipelines import Pipeline, Stage

if TYPE_CHECKING:
    from jobs.context import StageContext
    from jobs.models import Job

KIND = SYNC


def _list(ctx: StageContext) -> None:
    from documents.sources.sync import sync_list

    sync_list(ctx)


def _compare(ctx: StageContext) -> None:
    from documents.sources.sync import sync_compare

    sync_compare(ctx)


def _apply(ctx: StageContext) -> None:
    from documents.sources.sync import sync_apply

    sync_apply(ctx)


def _finished(job: Job) -> None:
    from documents.sources.finish import sync_finished

    sync_finished(job)


PIPELINE = Pipeline(
    kind=KIND,
    label=_("Source sync"),
    stages=(
        Stage("list", _list, weight=10, label=_("Listing"), unit="items", deadline=300),
        Stage("compare", _compare, weight=20, label=_("Comparing"), unit="items", deadline=300),
        Stage("apply", _apply, weight=70, label=_("Applying"), unit="items", deadline=300),
    ),
    on_finish=_finished,
    causes=(
        SOURCE_GONE,
        FOLDER_UNAVAILABLE,
        BUCKET_UNAVAILABLE,
        WEB_TOO_SLOW,
        WEB_UNAVAILABLE,
        SYNC_RUNNING,
        SYNC_QUEUE_FULL,
    ),
)


def register() -> Pipeline:
    return pipelines.register(PIPELINE)
