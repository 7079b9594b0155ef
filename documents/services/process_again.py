"""Process again: a cancelled or failed version's stored bytes become the document's next
version, processed by a new job (one job per version: the old version and its job stay as
history). The user uploads nothing; processing starts over.

Whether it may be done is answered by the ``process_again`` action this module registers in the
job engine's one table (``jobs/rules.py``), so the API's 409, the page's button, the status JSON
and the admin action give one answer.
"""

from __future__ import annotations

import uuid

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.files.base import File
from django.core.files.storage import default_storage
from django.utils.translation import gettext_noop

from documents.engines.validation import ValidatedUpload
from documents.kinds import INGEST as KIND
from documents.models import Document, DocumentVersion
from documents.services.storage import freed_reason
from documents.services.upload import NOT_LATEST, UploadResult, _create_version
from jobs import rules
from jobs.errors import TransitionRefused, UserAction, get_cause
from jobs.models import Actor, Job, Status


def _same_bytes_may_pass(job: rules.JobState) -> str | None:
    """A failure only new bytes can fix (a damaged, encrypted or oversized file ...: its cause
    tells the user to upload again) would fail the same way: only a corrected copy is offered."""
    if job.status != Status.FAILED:
        return None
    cause = get_cause(job.error_code)
    if cause.action == UserAction.REUPLOAD:
        return f"Processing the same file again would fail the same way. {cause.user_message}"
    return None


def _latest_of_its_document(job: rules.JobState) -> str | None:
    if job.kind != KIND:
        return "Only a document's processing can be run again."
    version = DocumentVersion.objects.filter(job_id=job.pk).select_related("document").first()
    if version is None or version.deleted_at is not None or version.document.deleted_at is not None:
        return "This version was deleted."
    if version.document.latest_version_id != version.pk:
        return NOT_LATEST
    freed = freed_reason(version)
    if freed is not None:
        return freed
    if not version.file.name or not default_storage.exists(version.file.name):
        return "The stored file of this version is gone: upload the file again."
    return _same_bytes_may_pass(job)


PROCESS_AGAIN = rules.Action(
    "process_again",
    frozenset({Status.FAILED, Status.CANCELLED}),
    otherwise="Only a cancelled or failed version can be processed again; this one is “{state}”.",
    condition=_latest_of_its_document,
    permission="operate",
    new_run=True,
)


def version_process_again(
    *,
    version: DocumentVersion,
    user: AbstractBaseUser | AnonymousUser | None = None,
    actor: Actor = Actor.USER,
) -> UploadResult:
    """Make the document's next version from the stored bytes of ``version`` (whose job was
    cancelled or failed) and start its job from the first stage; the title stays.

    Raises :class:`TransitionRefused` with the table's reason when the action does not apply
    (or a newer version appeared meanwhile), :class:`QuotaExceeded` when the queue is full.
    """
    job = Job.objects.filter(pk=version.job_id).first() if version.job_id else None
    if job is None or not version.file.name:
        raise TransitionRefused(gettext_noop("This version has no processing to run again."))
    rules.check("process_again", job)
    # The quotas (the copy below is stored bytes too) are answered under their locks in the
    # transaction that makes the version; a refused copy is removed.
    old_name = version.file.name
    # A copy under a new name: the old version keeps its own bytes (a delete of either version
    # removes only its own file). Copied a piece at a time, through the storage (a local folder or
    # a bucket), never whole in memory.
    extension = old_name.rsplit(".", 1)[-1]
    tenant = version.document.tenant
    name = f"uploads/{tenant.slug}/{uuid.uuid4().hex}.{extension}"
    try:
        with default_storage.open(old_name, "rb") as stored_file:
            stored = default_storage.save(name, File(stored_file))
    except FileNotFoundError:  # freed by the reaper since the check above
        version.refresh_from_db(fields=["bytes_freed_at"])
        reason = freed_reason(version) or "The stored file of this version is gone: upload the file again."
        raise TransitionRefused(reason, job_id=job.pk) from None
    checked = ValidatedUpload(
        kind=version.kind,
        content_type=version.content_type,
        size=version.size,
        sha256=version.sha256,
        safe_name=version.original_name,
        original_name=version.original_name,
        encoding=version.encoding or None,
        content=b"",  # already stored above; the version row needs only the facts
    )
    document = Document.objects.get(pk=version.document_id)
    try:
        return _create_version(
            tenant, checked, stored, "", None, user, document, None, again_from=version, actor=actor
        )
    except BaseException:
        default_storage.delete(stored)
        raise
