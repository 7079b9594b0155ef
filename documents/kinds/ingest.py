"""The document ingestion job kind, registered with the job engine from outside it.

Everything that is this kind's own lives in this bundle: the stages with their weights,
deadlines and units, the combined state words (``parse_failed`` ...), the failure causes with
their user messages (``documents/causes.py``), and the publish and cleanup hooks. Handlers are
imported when a stage first runs, so that reading the bundle (state words, labels) stays cheap
and free of import cycles.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from documents import causes
from documents.kinds import INGEST
from jobs import pipelines
from jobs.errors import _ as _
from jobs.pipelines import Handler, Pipeline, Stage

if TYPE_CHECKING:
    from jobs.context import StageContext
    from jobs.models import Job
    from jobs.rules import JobState

KIND = INGEST


def _stage(module: str) -> Handler:
    def run(ctx: StageContext) -> Any:
        return import_module(f"documents.stages.{module}").run(ctx)

    run.__qualname__ = run.__name__ = f"{module}.run"
    return run


def _publish(job: Job) -> None:
    from documents.services.publish import version_publish

    version_publish(job)


def _cleanup(job: Job, from_stage: str) -> None:
    from documents.sandbox.runner import discard_idle
    from documents.services.delete import deletions_finish_for
    from documents.services.publish import version_cleanup

    version_cleanup(job, from_stage)
    # A cancel that came between two sandbox calls left this worker's idle child holding its copy
    # of the input: a cancelled or failed document's bytes do not wait for the next job to go.
    discard_idle()
    # A job stopped by a delete: its deletion was waiting for it to finish.
    deletions_finish_for(job.payload["version_id"])


def _input_gone(job: JobState) -> str | None:
    from documents.models import DocumentVersion
    from documents.services.storage import freed_reason

    versions = DocumentVersion.objects.only("bytes_freed_at")
    version = versions.filter(job_id=job.pk, bytes_freed_at__isnull=False).first()
    return freed_reason(version) if version is not None else None


def _finished(job: Job) -> None:
    """Inside the terminal transition: the terminal state becomes an event, and the job's batch
    completes if it was the last one."""
    from documents.services.batches import batch_job_finished
    from documents.services.webhooks import document_job_event

    document_job_event(job)
    batch_job_finished(job)


# The words the pages show for each combined state word (translated where shown: the templates'
# filters, the page script's catalogue, and the reasons of refused actions).
STATE_LABELS = {
    "uploaded": _("Uploaded"),
    "queued": _("Queued"),
    "parsing": _("Parsing"),
    "ocr": _("Recognising text"),
    "chunking": _("Chunking"),
    "embedding": _("Embedding"),
    "indexing": _("Indexing"),
    "ready": _("Ready"),
    "parse_failed": _("Parsing failed"),
    "ocr_failed": _("Text recognition failed"),
    "chunk_failed": _("Chunking failed"),
    "embedding_failed": _("Embedding failed"),
    "index_failed": _("Indexing failed"),
    "cancel_requested": _("Stopping…"),
    "cancelled": _("Cancelled"),
    "stalled": _("Stalled"),
}

PIPELINE = Pipeline(
    kind=KIND,
    label="Document ingestion",
    stages=(
        Stage(
            "parsing",
            _stage("parse"),
            weight=20,
            label="Parsing",
            unit="pages",
            deadline=120,
            timeout_cause=causes.PARSE_TIMEOUT.code,
            failed_word="parse_failed",
        ),
        Stage(
            "ocr",
            _stage("ocr"),
            weight=25,
            label="OCR",
            unit="pages",
            deadline=300,
            timeout_cause=causes.OCR_TIMEOUT.code,
            failed_word="ocr_failed",
        ),
        Stage(
            "chunking",
            _stage("chunk"),
            weight=15,
            label="Chunking",
            unit="chunks",
            deadline=120,
            failed_word="chunk_failed",
        ),
        Stage(
            "embedding",
            _stage("embed"),
            weight=25,
            label="Embedding",
            unit="batches",
            deadline=300,
            failed_word="embedding_failed",
        ),
        Stage(
            "indexing",
            _stage("index"),
            weight=15,
            label="Indexing",
            unit="batches",
            deadline=120,
            failed_word="index_failed",
        ),
    ),
    publish=_publish,
    cleanup=_cleanup,
    on_finish=_finished,
    input_gone=_input_gone,
    causes=causes.ALL,
    state_labels=STATE_LABELS,
)


def register() -> Pipeline:
    return pipelines.register(PIPELINE)
