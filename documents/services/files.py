"""File objects of the OpenAI-compatible API (``/v1/files``): stored bytes of a tenant.

A file object is only stored bytes; it becomes searchable when it is attached to a vector store,
which hands the bytes to the upload service (checked by content there, as every upload is).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import IO, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import QuerySet

from documents.models import FileObject, Tenant
from documents.services.storage import StorageQuotaExceeded, check_storage, lock_storage

PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")
# As OpenAI: files of these purposes are not downloadable through /content.
NOT_DOWNLOADABLE = frozenset({"assistants"})


@dataclass
class FileInputError(Exception):
    """A refused file request: a code, a user-safe message, the parameter, the HTTP status."""

    param: str
    code: str
    message: str
    http_status: int = 400


def file_create(*, tenant: Tenant, user: Any, data: bytes, filename: str, purpose: str) -> FileObject:
    """Store ``data`` as a file object of ``tenant``; nothing stays stored when it is refused."""
    if purpose not in PURPOSES:
        raise FileInputError("purpose", "invalid_purpose", f"purpose must be one of: {', '.join(PURPOSES)}.")
    limit = settings.DOCUMENTS_MAX_UPLOAD_BYTES
    if len(data) > limit:
        raise FileInputError("file", "file_too_large", f"The file is larger than {limit} bytes.", 413)
    if not data:
        raise FileInputError("file", "empty_file", "The file is empty.")
    name = (filename or "upload").replace("/", "_").replace("\\", "_")[:255]
    owner = user if isinstance(user, get_user_model()) else None
    obj = FileObject(
        tenant=tenant,
        filename=name,
        purpose=purpose,
        bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        created_by=owner,
    )
    obj.stored_name = default_storage.save(f"v1files/{tenant.pk}/{obj.id}", ContentFile(data))
    try:
        with transaction.atomic():
            # The quota's answer (one, here): parallel uploads of one tenant count one after the
            # other; a refused file's bytes are removed below.
            lock_storage(tenant)
            _check_room(tenant, len(data))
            obj.save(force_insert=True)
    except BaseException:
        default_storage.delete(obj.stored_name)  # nothing half-made stays behind
        raise
    return obj


def _check_room(tenant: Tenant, size: int) -> None:
    try:
        check_storage(tenant, size)
    except StorageQuotaExceeded as full:
        raise FileInputError("file", full.code, full.message, full.http_status) from full


def file_open(obj: FileObject) -> IO[bytes]:
    """The stored bytes of a file object, opened for reading in pieces (a download streams them)."""
    handle: IO[bytes] = default_storage.open(obj.stored_name, "rb")
    return handle


def file_read(obj: FileObject) -> bytes:
    """The stored bytes of a file object."""
    with default_storage.open(obj.stored_name, "rb") as handle:
        data: bytes = handle.read()
    return data


def file_delete(*, tenant: Tenant, file_id: str, files: QuerySet[FileObject] | None = None) -> bool:
    """Delete a file object and its bytes; False when ``tenant`` has no such file (among
    ``files``, the ones the caller may see, when given). Documents made from it in vector stores
    stay (as with OpenAI: they are deleted through the vector store)."""
    with transaction.atomic():
        found = FileObject.objects.all() if files is None else files
        obj = found.select_for_update().filter(tenant=tenant, pk=file_id).first()
        if obj is None:
            return False
        stored = obj.stored_name
        obj.delete()
        transaction.on_commit(lambda: default_storage.delete(stored))
    return True
