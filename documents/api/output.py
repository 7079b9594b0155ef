"""The output contract: what a job status, a document, a version, an upload, a deletion, an
event and an error look like, wherever they are sent.

These serializers are the one description of those shapes. The REST views, the SSE stream and
the JSON the document page embeds for its script all render through them, and drf-spectacular
publishes the same classes as the OpenAPI schema, so the schema describes what is sent.

Rendering goes through one module-level instance per shape (``to_representation`` over fields
built once), not a serializer built per call: the status body is on the hot path of the status
endpoint and of every SSE wake.
"""

# long-module: one module holds every output shape of the API, its pages and its event stream
# (the "one output contract"); the shapes nest (a document holds versions holding jobs).

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from operator import attrgetter
from typing import Any
from urllib.parse import quote

from django.urls import get_script_prefix, reverse
from rest_framework import serializers
from rest_framework.fields import Field, SkipField

from documents.api.serializers import ATTRIBUTES_HELP, AttributesField
from documents.evaluation.models import EvaluationRun
from documents.models import Document, DocumentVersion
from documents.selectors import STATE_WORDS, versions_of
from documents.services.dedup import reused_from_out
from documents.services.delete import DeleteResult
from documents.services.reindex import Counts, counts
from documents.services.reindex_gate import gate_of
from documents.services.storage import bytes_kept_until
from documents.services.upload import UploadResult
from documents.texts import localize
from jobs import rules
from jobs.models import Job, JobEvent, Status
from jobs.rules import JobState
from jobs.selectors import JobFacts, JobView, job_view

# --- the base of every output shape ----------------------------------------------------------


Getter = Callable[[Any], Any]


class Output(serializers.Serializer[Any]):
    """A serializer of answers: ``to_representation`` over its declared fields, each field's
    source resolved to a getter once. DRF's own loop walks every dotted source step by step on
    every call, which made a status body cost several times the facts it shows; the values are
    the same (a field that finds nothing, or that reads its value its own way, is asked as DRF
    asks it)."""

    @cached_property
    def _plan(self) -> list[tuple[str, Getter, Getter, Getter]]:
        """Per field: its name, a fast getter, DRF's own getter, and its rendering."""
        plan: list[tuple[str, Getter, Getter, Getter]] = []
        for field in self._readable_fields:
            own_way = field.source == "*" or type(field).get_attribute is not Field.get_attribute
            drf = field.get_attribute
            fast = drf if own_way else attrgetter(str(field.source))
            plan.append((str(field.field_name), fast, drf, field.to_representation))
        return plan

    def to_representation(self, instance: Any) -> dict[str, Any]:
        answer: dict[str, Any] = {}
        for name, fast, drf, render in self._plan:
            try:
                value = fast(instance)
                if fast is not drf and callable(value):  # DRF calls a method named as the source
                    value = drf(instance)
            except SkipField:
                continue
            except (AttributeError, KeyError, TypeError):  # a mapping, or a missing link on the way
                try:
                    value = drf(instance)
                except SkipField:
                    continue
            answer[name] = None if value is None else render(value)
        return answer


# --- fields ----------------------------------------------------------------------------------


class IsoDateTimeField(serializers.DateTimeField):
    """A timestamp as Python's ``isoformat()`` writes it (``...+00:00``): what the API has
    always sent (DRF's own field would write ``Z``)."""

    def to_representation(self, value: datetime | None) -> str | None:  # type: ignore[override]
        return value.isoformat() if value else None


_PLACEHOLDERS = {"document_id": "DOCUMENT-ID", "job_id": "JOB-ID"}
_ROUTES: dict[tuple[str, str], str] = {}


def job_url(url_name: str, document_id: Any, job_id: Any) -> str:
    """``reverse(url_name, kwargs=...)`` of a document job's route. The route is reversed once
    per name and script prefix with placeholders, and the ids are put in its place: a status
    body has two URLs, and two full reverses cost more than the rest of the body."""
    key = (url_name, get_script_prefix())
    route = _ROUTES.get(key)
    if route is None:
        route = _ROUTES[key] = reverse(url_name, kwargs=_PLACEHOLDERS)
    return route.replace(_PLACEHOLDERS["document_id"], _path_part(document_id), 1).replace(
        _PLACEHOLDERS["job_id"], _path_part(job_id), 1
    )


def _path_part(value: Any) -> str:
    # A UUID's text needs no quoting; anything else is quoted as reverse() would.
    return str(value) if isinstance(value, uuid.UUID) else quote(str(value), safe="")


class JobUrlField(serializers.CharField):
    """The URL of a document job's route ``url_name`` for the instance's version and job (a
    :class:`StatusSource` or an :class:`UploadResult`)."""

    def __init__(self, url_name: str, **kwargs: Any) -> None:
        self.url_name = url_name
        super().__init__(source="*", **kwargs)

    def get_attribute(self, instance: Any) -> str:
        return job_url(self.url_name, instance.version.document_id, instance.job.pk)


class OptionalJSONField(serializers.JSONField):
    """Left out of the answer when empty (an error's ``detail``)."""

    def get_attribute(self, instance: Any) -> Any:
        value = super().get_attribute(instance)
        if not value:
            raise SkipField()
        return value


# --- a job's status --------------------------------------------------------------------------


@dataclass(frozen=True)
class StatusSource:
    """What one status body is made of: the version, the job (its row, or its facts as one of
    its events recorded them), the job's view, and the version's publication as of then."""

    version: DocumentVersion
    job: JobState
    view: JobView
    published_at: datetime | None

    @classmethod
    def now(cls, version: DocumentVersion, job: Job | None = None) -> StatusSource:
        job = job or version.job
        assert job is not None
        return cls(version, job, job_view(job), version.published_at)

    @classmethod
    def as_of(cls, version: DocumentVersion, job: Job, event: JobEvent) -> StatusSource:
        """The status as ``event`` left it (a replayed event of the SSE stream)."""
        facts = JobFacts.as_of(job, event)
        # Before the event that made it ready the version was not published yet.
        published_at = version.published_at if event.to_status == Status.READY else None
        return cls(version, facts, job_view(facts), published_at)

    @property
    def can_process_again(self) -> bool:
        # A new version from this one's stored bytes (documents/services/process_again.py).
        return rules.allowed("process_again", self.job)

    @property
    def bytes_kept_until(self) -> datetime | None:
        # Stored bytes (documents/services/storage.py): until when a stopped version keeps them.
        return bytes_kept_until(self.version, self.job)


class ErrorOut(Output):
    code = serializers.CharField()
    message = serializers.CharField()
    retryable = serializers.BooleanField()
    action = serializers.ChoiceField(choices=["reupload", "retry", "wait", "contact_operator"])


class StageOut(Output):
    name = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]  # a field named like Field.label
    state = serializers.ChoiceField(choices=["done", "running", "waiting", "skipped", "failed", "cancelled"])


class JobStatusOut(Output):
    """A document job's status: the status endpoint's body, each SSE event's ``data`` and the
    document page's embedded status. Renders a :class:`StatusSource`; nested in another shape,
    its source is a version (``None`` without a job)."""

    job_id = serializers.UUIDField(source="view.job_id")
    document_id = serializers.UUIDField(source="version.document_id")
    version = serializers.IntegerField(source="version.number")
    status = serializers.CharField(
        source="view.status", help_text="Lifecycle fact: queued, running, ready, failed ..."
    )
    stage = serializers.CharField(source="view.stage")
    stage_label = serializers.CharField(source="view.stage_label")
    state = serializers.ChoiceField(
        choices=STATE_WORDS, source="view.state", help_text="The combined word, e.g. ocr_failed."
    )
    stage_index = serializers.IntegerField(source="view.stage_index")
    stage_count = serializers.IntegerField(source="view.stage_count")
    progress = serializers.FloatField(
        source="view.progress", allow_null=True, help_text="Null when no honest number exists."
    )
    processed = serializers.IntegerField(source="view.processed", allow_null=True)
    total = serializers.IntegerField(source="view.total", allow_null=True)
    unit = serializers.CharField(source="view.unit")
    attempt = serializers.IntegerField(source="view.attempt")
    can_cancel = serializers.BooleanField(source="view.can_cancel")
    can_retry = serializers.BooleanField(source="view.can_retry")
    can_process_again = serializers.BooleanField()
    bytes_freed_at = IsoDateTimeField(
        source="version.bytes_freed_at",
        allow_null=True,
        help_text="When the stored file was removed after the retention (no retry then).",
    )
    bytes_kept_until = IsoDateTimeField(
        allow_null=True, help_text="For a stopped or replaced version: when its stored file will be removed."
    )
    cancel_requested = serializers.BooleanField(source="view.cancel_requested")
    updated_at = IsoDateTimeField(source="view.updated_at")
    finished_at = IsoDateTimeField(source="view.finished_at", allow_null=True)
    heartbeat_at = IsoDateTimeField(source="view.heartbeat_at", allow_null=True)
    published_at = IsoDateTimeField(allow_null=True)
    error = ErrorOut(source="view.error", allow_null=True)
    stages = StageOut(source="view.stages", many=True)
    status_url = JobUrlField("api-job")
    events_url = JobUrlField("api-job-events")

    def get_attribute(self, instance: Any) -> StatusSource | None:
        version = super().get_attribute(instance)
        if version is None or version.job is None:
            return None
        return StatusSource.now(version)


_STATUS = JobStatusOut()


def job_status(version: DocumentVersion, job: Job | None = None) -> dict[str, Any]:
    """The status JSON of a version's job (``job``: a fresher copy than ``version.job``)."""
    return _STATUS.to_representation(StatusSource.now(version, job))


def job_status_as_of(version: DocumentVersion, job: Job, event: JobEvent) -> dict[str, Any]:
    """The status JSON as ``event`` left it, rendered from the event row and the job's facts."""
    return _STATUS.to_representation(StatusSource.as_of(version, job, event))


# --- uploads, versions, documents ----------------------------------------------------------


class ReusedFromOut(Output):
    document_id = serializers.UUIDField()
    version = serializers.IntegerField()

    def get_attribute(self, instance: Any) -> dict[str, Any] | None:
        # Dedup: the earlier version whose verified outputs this one copies (null: processed anew).
        return None if instance.duplicate else reused_from_out(instance.version)


class UploadOut(Output):
    """The answer to an upload (an :class:`UploadResult`)."""

    document_id = serializers.UUIDField(source="document.pk")
    version = serializers.IntegerField(source="version.number")
    job_id = serializers.UUIDField(source="job.pk")
    duplicate = serializers.BooleanField(help_text="True when identical to the published version.")
    reused_from = ReusedFromOut(
        allow_null=True,
        source="*",
        help_text="The published version of this workspace with the same bytes and settings whose "
        "verified outputs this version copies (its job still reports every stage); null: processed anew.",
    )
    status_url = JobUrlField("api-job")
    events_url = JobUrlField("api-job-events")


class VersionOut(Output):
    version = serializers.IntegerField(source="number")
    original_name = serializers.CharField()
    content_type = serializers.CharField()
    size = serializers.IntegerField()
    sha256 = serializers.CharField()
    created_at = IsoDateTimeField()
    published_at = IsoDateTimeField(allow_null=True)
    superseded_at = IsoDateTimeField(allow_null=True)
    job = JobStatusOut(source="*", allow_null=True)


class VersionsOut(serializers.ListSerializer[Any]):
    """A document's versions, newest first (deleted ones left out)."""

    def get_attribute(self, instance: Document) -> Any:
        return versions_of(instance)


class DocumentOut(Output):
    document_id = serializers.UUIDField(source="pk")
    collection_id = serializers.UUIDField()
    title = serializers.CharField()
    attributes = AttributesField(help_text=ATTRIBUTES_HELP)
    created_at = IsoDateTimeField()
    last_activity_at = IsoDateTimeField()
    published_version = serializers.IntegerField(source="published_version.number", allow_null=True)
    published_at = IsoDateTimeField(source="published_version.published_at", allow_null=True)
    latest_job = JobStatusOut(source="latest_version", allow_null=True)


class DocumentDetailOut(DocumentOut):
    versions = VersionsOut(child=VersionOut(), source="*")


class StorageOut(Output):
    """The workspace's stored bytes against its limit (cancelled and failed versions count until
    their retention frees them)."""

    used_bytes = serializers.IntegerField()
    limit_bytes = serializers.IntegerField(allow_null=True, help_text="Null: no limit.")


class DocumentPageOut(Output):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = DocumentOut(many=True)
    storage = StorageOut()


class DeletionOut(Output):
    """A delete whose cleanup is still running (the document is already gone from every list)."""

    deletion_id = serializers.IntegerField(source="deletion.pk")
    document_id = serializers.UUIDField(source="deletion.document_id")
    version = serializers.IntegerField(
        source="deletion.version_number",
        allow_null=True,
        help_text="Empty when the whole document was deleted.",
    )
    requested_at = IsoDateTimeField(source="deletion.requested_at")
    cleanup = serializers.SerializerMethodField()

    def get_cleanup(self, result: DeleteResult) -> str:
        return "pending" if result.pending else "done"


_UPLOAD = UploadOut()
_DOCUMENT = DocumentOut()
_DOCUMENT_DETAIL = DocumentDetailOut()
_DELETION = DeletionOut()


def upload_out(result: UploadResult) -> dict[str, Any]:
    return _UPLOAD.to_representation(result)


def document_out(document: Document) -> dict[str, Any]:
    """A document in a list: its summary and its latest job's status."""
    return _DOCUMENT.to_representation(document)


def document_detail_out(document: Document) -> dict[str, Any]:
    """The document with every version and its job: the body of GET (and PATCH)."""
    return _DOCUMENT_DETAIL.to_representation(document)


def deletion_out(result: DeleteResult) -> dict[str, Any]:
    return _DELETION.to_representation(result)


# --- a re-index job's status ----------------------------------------------------------------


@dataclass(frozen=True)
class ReindexSource:
    """A re-index job, its view, and its versions and chunks done of the published total."""

    job: Job
    view: JobView
    counts: Counts

    @classmethod
    def of(cls, job: Job) -> ReindexSource:
        return cls(job, job_view(job), counts(job.payload["tenant_id"], str(job.payload.get("target", ""))))

    @property
    def embedder(self) -> str:
        return str(self.job.payload.get("target", ""))

    @property
    def previous_embedder(self) -> str:
        return str(self.job.payload.get("from", ""))

    @property
    def versions(self) -> dict[str, int]:
        return {"done": self.counts.versions_done, "total": self.counts.versions}

    @property
    def chunks(self) -> dict[str, int]:
        return {"done": self.counts.chunks_done, "total": self.counts.chunks}

    @property
    def status_url(self) -> str:
        return reverse("api-reindex-job", kwargs={"job_id": str(self.job.pk)})

    @property
    def evaluation(self) -> dict[str, Any] | None:
        return gate_of(self.job)


class ReindexOut(Output):
    """A re-index job's status (the API's and the admin's): the fields of a document job's
    status that a workspace-wide job has, plus its embedders and its counts."""

    job_id = serializers.UUIDField(source="view.job_id")
    status = serializers.CharField(source="view.status")
    stage = serializers.CharField(source="view.stage")
    stage_label = serializers.CharField(source="view.stage_label")
    state = serializers.CharField(source="view.state")
    stage_index = serializers.IntegerField(source="view.stage_index")
    stage_count = serializers.IntegerField(source="view.stage_count")
    progress = serializers.FloatField(source="view.progress", allow_null=True)
    processed = serializers.IntegerField(source="view.processed", allow_null=True)
    total = serializers.IntegerField(source="view.total", allow_null=True)
    unit = serializers.CharField(source="view.unit")
    attempt = serializers.IntegerField(source="view.attempt")
    can_cancel = serializers.BooleanField(source="view.can_cancel")
    can_retry = serializers.BooleanField(source="view.can_retry")
    cancel_requested = serializers.BooleanField(source="view.cancel_requested")
    updated_at = IsoDateTimeField(source="view.updated_at")
    finished_at = IsoDateTimeField(source="view.finished_at", allow_null=True)
    error = ErrorOut(source="view.error", allow_null=True)
    stages = StageOut(source="view.stages", many=True)
    embedder = serializers.CharField()
    previous_embedder = serializers.CharField()
    versions = serializers.DictField(child=serializers.IntegerField(), help_text="done and total")
    chunks = serializers.DictField(child=serializers.IntegerField(), help_text="done and total")
    status_url = serializers.CharField()
    evaluation = serializers.JSONField(
        allow_null=True,
        help_text="A gated re-index's evaluation: query_set_id, margin, before_run_id, after_run_id, "
        "mrr_before, mrr_after, passed (null until both runs finished); null when not gated.",
    )


_REINDEX = ReindexOut()


def reindex_status(job: Job) -> dict[str, Any]:
    """The re-index job's status JSON (the API's and the admin's)."""
    return _REINDEX.to_representation(ReindexSource.of(job))


# --- an evaluation run's status ------------------------------------------------------------------


@dataclass(frozen=True)
class EvaluationRunSource:
    """An evaluation run and its job's view (a gate's runs have no job of their own)."""

    run: EvaluationRun
    view: JobView | None

    @classmethod
    def of(cls, run: EvaluationRun) -> EvaluationRunSource:
        job = Job.objects.filter(pk=run.job_id).first() if run.job_id else None
        return cls(run, job_view(job) if job is not None else None)

    @property
    def status(self) -> str:
        return self.view.status if self.view else "ready"

    @property
    def state(self) -> str:
        return self.view.state if self.view else "ready"

    @property
    def progress(self) -> float | None:
        return self.view.progress if self.view else 100.0

    @property
    def error(self) -> dict[str, Any] | None:
        return self.view.error if self.view else None

    @property
    def status_url(self) -> str:
        return reverse("api-evaluation-run", kwargs={"run_id": str(self.run.pk)})


class EvaluationRunOut(Output):
    """An evaluation run: its job's state and, once ready, its figures (docs/evaluation.md)."""

    id = serializers.UUIDField(source="run.pk")
    query_set_id = serializers.UUIDField(source="run.query_set_id")
    job_id = serializers.UUIDField(source="run.job_id", allow_null=True)
    reindex_job_id = serializers.UUIDField(
        source="run.gate_of_id", allow_null=True, help_text="The re-index whose gate made this run."
    )
    status = serializers.CharField()
    state = serializers.CharField()
    progress = serializers.FloatField(allow_null=True)
    error = serializers.JSONField(allow_null=True)
    embedder = serializers.CharField(source="run.embedder")
    modes = serializers.ListField(child=serializers.CharField(), source="run.modes")
    config = serializers.JSONField(source="run.config", help_text="What produced the figures.")
    summary = serializers.JSONField(
        source="run.summary",
        help_text="{mode: {language: {queries, recall@1, ..., ndcg@10}}}; {} until ready.",
    )
    created_at = IsoDateTimeField(source="run.created_at")
    finished_at = IsoDateTimeField(source="run.finished_at", allow_null=True)
    status_url = serializers.CharField()


_EVALUATION_RUN = EvaluationRunOut()


def evaluation_run_status(run: EvaluationRun) -> dict[str, Any]:
    """An evaluation run's JSON (the API's)."""
    return _EVALUATION_RUN.to_representation(EvaluationRunSource.of(run))


# --- errors ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ErrorInfo:
    code: str
    message: str
    detail: Any = None


class ErrorBodyOut(Output):
    code = serializers.CharField(help_text="Stable, for programs: e.g. file_too_large, not_found.")
    message = serializers.CharField(help_text="Safe to show a user.")
    detail = OptionalJSONField(required=False, help_text="Field errors, where there are any.")


class ErrorOutEnvelope(Output):
    """Every API answer that is not a success: ``{"error": {"code", "message", "detail"?}}``."""

    error = ErrorBodyOut(source="*")


_ERROR = ErrorOutEnvelope()


def error_body(code: str, message: str, detail: Any = None) -> dict[str, Any]:
    """The error envelope; the message is said in the request's language (the code stays)."""
    return _ERROR.to_representation(ErrorInfo(code, localize(message), detail))
