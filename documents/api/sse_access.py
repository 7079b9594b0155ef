"""Who may open an event stream, and keep it: the token or session behind the request, the
status poll's access check when it opens, and the same check again while it stays open
(``documents.api.sse``). Each runs in a worker thread and closes its connection after it, so
that open streams hold no database connection between reads."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.http import HttpRequest

from documents.api.auth import user_for_token
from documents.models import DocumentVersion
from documents.principals import Viewer
from documents.selectors import access_version_by_job, tenant_for, viewer_for


def sent_token(request: HttpRequest) -> str | None:
    """The key of ``Authorization: Token <key>`` (or ``Bearer <key>``), as the API takes it."""
    scheme, _, key = request.headers.get("Authorization", "").partition(" ")
    return key.strip() if scheme.lower() in ("token", "bearer") and key.strip() else None


def _user_from_token(request: HttpRequest) -> Any:
    key = sent_token(request)
    if key is None:
        return None
    found = user_for_token(key)
    return found[0] if found is not None and found[0].is_active else None


Access = tuple[int, DocumentVersion | None, Any, Viewer | None]


def resolve(request: HttpRequest, document_id: str, job_id: str) -> Access:
    """The answer's status (200, 401, 403, 404), the version, the user's id and the caller."""
    try:
        return _check_access(request, document_id, job_id)
    finally:
        connection.close()


def _check_access(request: HttpRequest, document_id: str, job_id: str) -> Access:
    """The answer's status, the version, the user's id and the caller (for checking again)."""
    user = _user_from_token(request) or request.user
    if user is None or not user.is_authenticated:
        return 401, None, None, None
    tenant = tenant_for(user)
    if tenant is None:
        return 403, None, None, None
    viewer = viewer_for(user, tenant)
    version = access_version_by_job(viewer, document_id, job_id)
    found = version is not None and version.job is not None
    return (200, version, user.pk, viewer) if found else (404, None, None, None)


def still_visible(viewer: Viewer, document_id: Any, job_id: Any) -> bool:
    """Whether the caller may still see the stream's document: the status poll's one query
    (their groups and permission read inside it), on a connection closed afterwards."""
    try:
        return access_version_by_job(viewer, document_id, job_id) is not None
    finally:
        connection.close()
