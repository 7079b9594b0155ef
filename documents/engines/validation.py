"""Check an upload before anything is stored: size, type by content, the kind's own checks (the
parser's: DOCX bombs) and the file name.

Every rejection has its own code, HTTP status and a short message that is safe to show the user;
``detail`` on the exception is for logs and operators only.
"""

from __future__ import annotations

import enum
import hashlib
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Protocol

from documents import parsers
from documents.engines.sniff import sniff
from documents.texts import Text, Words, gettext_noop

MB = 1024 * 1024


class RejectCode(enum.StrEnum):
    """Why an upload was refused; stable, for API clients."""

    FILE_EMPTY = "file_empty"
    FILE_TOO_LARGE = "file_too_large"
    UNSUPPORTED_TYPE = "unsupported_type"
    DOCX_BOMB = "docx_bomb"
    INVALID_NAME = "invalid_name"


_HTTP_STATUS = {
    RejectCode.FILE_EMPTY: 400,
    RejectCode.FILE_TOO_LARGE: 413,
    RejectCode.UNSUPPORTED_TYPE: 415,
    RejectCode.DOCX_BOMB: 400,
    RejectCode.INVALID_NAME: 400,
}


class UploadRejected(Exception):
    """An upload refused before storage: ``code`` and ``message`` are for the client."""

    def __init__(self, code: RejectCode, message: str, *, detail: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.http_status = _HTTP_STATUS[code]
        self.detail = detail


@dataclass(frozen=True)
class ValidatedUpload:
    """An accepted upload. ``content`` is exactly the bytes that were checked and hashed."""

    kind: str
    content_type: str
    size: int
    sha256: str
    safe_name: str
    original_name: str
    encoding: str | None
    content: bytes = field(repr=False)


class Readable(Protocol):
    """A binary file-like: Django's UploadedFile, an open file, io.BytesIO."""

    def read(self, size: int, /) -> bytes: ...


def unsupported_message() -> Text:
    """The refusal of a type no parser reads, naming the types the parser registry holds now."""
    return Text(
        gettext_noop("This file type is not supported. Upload one of these types: %(types)s."),
        types=Words(parsers.labels()),
    )


def validate_upload(
    data: bytes | Readable,
    *,
    filename: str,
    max_bytes: int,
    check_limits: Mapping[str, Any] | None = None,
    docx_limits: Any = None,
) -> ValidatedUpload:
    """Check an upload by its content and return what it is, or raise :class:`UploadRejected`.

    At most ``max_bytes + 1`` bytes are read from a file-like ``data``. The client's name and MIME
    type are never trusted: the type comes from the content, the name is sanitised. The kind's
    parser may check it further with its limits from ``check_limits`` (by kind name; its own
    defaults when absent); ``docx_limits`` is short for ``check_limits["docx"]``.
    """
    content = _read_bounded(data, max_bytes)
    if not content:
        raise UploadRejected(RejectCode.FILE_EMPTY, "The file is empty.")
    if len(content) > max_bytes:
        raise UploadRejected(
            RejectCode.FILE_TOO_LARGE,
            Text(
                gettext_noop("The file is larger than the limit of %(limit)s."), limit=_human_size(max_bytes)
            ),
            detail=f"read more than {max_bytes} bytes",
        )
    safe_name = safe_filename(filename)
    if not safe_name:
        raise UploadRejected(
            RejectCode.INVALID_NAME,
            "The file name is not usable. Rename the file and upload it again.",
            detail=f"nothing left of {filename!r} after sanitising",
        )
    limits = {**(check_limits or {}), **({"docx": docx_limits} if docx_limits is not None else {})}
    try:
        sniffed = sniff(content, filename=safe_name)
        if sniffed is None:
            raise UploadRejected(
                RejectCode.UNSUPPORTED_TYPE, unsupported_message(), detail="no supported signature"
            )
        check = parsers.parser_for(sniffed.kind).check_upload
        if check is not None:
            check(content, limits.get(sniffed.kind))
    except parsers.UploadCheckFailed as exc:
        raise _check_rejection(exc) from exc
    return ValidatedUpload(
        kind=sniffed.kind,
        content_type=parsers.file_kind(sniffed.kind).content_type,
        size=len(content),
        sha256=hashlib.sha256(content).hexdigest(),
        safe_name=safe_name,
        original_name=filename,
        encoding=sniffed.encoding,
        content=content,
    )


_READ_CHUNK = MB


def _read_bounded(data: bytes | Readable, max_bytes: int) -> bytes:
    """All of ``data``, or its first ``max_bytes + 1`` bytes: enough to know it is too large."""
    if isinstance(data, bytes):
        return data
    chunks: list[bytes] = []
    remaining = max_bytes + 1
    while remaining > 0:
        chunk = data.read(min(remaining, _READ_CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _human_size(size: int) -> str:
    for unit, scale in (("GB", 1024 * MB), ("MB", MB), ("KB", 1024)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size} bytes"


def _check_rejection(failed: parsers.UploadCheckFailed) -> UploadRejected:
    code = RejectCode(failed.code)
    if failed.message is None or code is RejectCode.UNSUPPORTED_TYPE:
        return UploadRejected(RejectCode.UNSUPPORTED_TYPE, unsupported_message(), detail=failed.detail)
    return UploadRejected(code, failed.message, detail=failed.detail)


# --- file names --------------------------------------------------------------------------------

MAX_NAME_BYTES = 200
_MAX_SUFFIX_CHARS = 16
# Reserved on Windows and awkward in Content-Disposition headers.
_AWKWARD_CHARS = re.compile(r'[<>:"|?*]')


def safe_filename(name: str, *, max_bytes: int = MAX_NAME_BYTES) -> str:
    """A display-safe version of a client's file name, or "" when nothing usable is left.

    Directories (``/`` and ``\\``) are dropped, whitespace collapsed, control and format characters
    (including bidirectional overrides) removed, the result NFC-normalised and cut to ``max_bytes``
    of UTF-8 keeping the extension. Letters of every script survive.
    """
    name = re.split(r"[/\\]", name)[-1]
    name = " ".join(name.split())
    name = "".join(char for char in name if not unicodedata.category(char).startswith("C"))
    name = _AWKWARD_CHARS.sub("_", unicodedata.normalize("NFC", name))
    name = name.strip(" .")
    if len(name.encode()) <= max_bytes:
        return name
    suffix = PurePosixPath(name).suffix
    if len(suffix) > _MAX_SUFFIX_CHARS:
        suffix = ""
    stem = name[: len(name) - len(suffix)] if suffix else name
    budget = max_bytes - len(suffix.encode())
    # Cutting UTF-8 bytes may split a character; "ignore" drops the partial one.
    stem = stem.encode()[:budget].decode("utf-8", "ignore").rstrip(" .")
    return f"{stem}{suffix}" if stem else ""
