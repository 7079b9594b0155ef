"""Check an upload before anything is stored: size, type by content, DOCX bombs and the file name.

Every rejection has its own code, HTTP status and a short message that is safe to show the user;
``detail`` on the exception is for logs and operators only.
"""

from __future__ import annotations

import enum
import hashlib
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Protocol

from documents.engines.sniff import (
    DOCX_REQUIRED_MEMBERS,
    Kind,
    ZipDirectoryTooLarge,
    read_zip_directory,
    sniff,
)
from documents.texts import Text, gettext_noop

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

    kind: Kind
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


UNSUPPORTED_MESSAGE = (
    "This file type is not supported. Upload a PDF, DOCX, HTML, Markdown, text, PNG, JPEG or TIFF file."
)


def validate_upload(
    data: bytes | Readable, *, filename: str, max_bytes: int, docx_limits: DocxLimits | None = None
) -> ValidatedUpload:
    """Check an upload by its content and return what it is, or raise :class:`UploadRejected`.

    At most ``max_bytes + 1`` bytes are read from a file-like ``data``. The client's name and MIME
    type are never trusted: the type comes from the content, the name is sanitised.
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
    try:
        sniffed = sniff(content, filename=safe_name)
    except ZipDirectoryTooLarge as exc:
        raise _docx_rejection(ArchiveProblem.TOO_MANY_ENTRIES, str(exc)) from exc
    if sniffed is None:
        raise UploadRejected(
            RejectCode.UNSUPPORTED_TYPE, UNSUPPORTED_MESSAGE, detail="no supported signature"
        )
    if sniffed.kind is Kind.DOCX:
        try:
            check_docx_archive(content, limits=docx_limits or DOCX_LIMITS)
        except DocxArchiveRejected as exc:
            raise _docx_rejection(exc.problem, exc.detail) from exc
    return ValidatedUpload(
        kind=sniffed.kind,
        content_type=sniffed.kind.content_type,
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


# --- DOCX archives -----------------------------------------------------------------------------


class ArchiveProblem(enum.StrEnum):
    """What the DOCX zip pre-check found wrong."""

    NOT_A_ZIP = "not_a_zip"
    NOT_DOCX = "not_docx"
    TOO_MANY_ENTRIES = "too_many_entries"
    TOO_LARGE = "too_large"
    ENCRYPTED = "encrypted"


class DocxArchiveRejected(ValueError):
    """The zip pre-check refused a DOCX; ``detail`` says why, for operators."""

    def __init__(self, problem: ArchiveProblem, detail: str) -> None:
        super().__init__(detail)
        self.problem = problem
        self.detail = detail


@dataclass(frozen=True, slots=True)
class DocxLimits:
    """What a DOCX may expand to. python-docx holds every part in memory: a 2.1 MB file expanding to
    2 GiB exhausted memory, and the zip directory is the only cheap place to stop it."""

    max_member_bytes: int = 100 * MB
    max_total_bytes: int = 300 * MB
    max_ratio: float = 200
    # Small members compress absurdly well (a page of spaces) yet cannot exhaust memory.
    ratio_floor_bytes: int = MB
    # XML parts are parsed into trees (about 17x their size in memory): a 95 MB document.xml
    # inside a 12.6 MB DOCX passed the limits above and parsed for over 10 minutes at 1.6 GB.
    # Media parts (images) are only copied, so they keep the larger member limit.
    max_xml_member_bytes: int = 25 * MB


DOCX_LIMITS = DocxLimits()
# General purpose bit 0 of a zip entry: the member is encrypted.
_ENCRYPTED_FLAG = 0x1


def check_docx_archive(data: bytes, *, limits: DocxLimits = DOCX_LIMITS) -> None:
    """Refuse a DOCX whose zip directory shows a bomb, encryption or missing parts.

    Reads only the directory. Its sizes can be trusted because zipfile (which python-docx uses)
    stops at a member's declared size and fails the CRC check if the data goes on.
    Raises :class:`DocxArchiveRejected`.
    """
    try:
        members = read_zip_directory(data)
    except ZipDirectoryTooLarge as exc:
        raise DocxArchiveRejected(ArchiveProblem.TOO_MANY_ENTRIES, str(exc)) from exc
    if members is None:
        raise DocxArchiveRejected(ArchiveProblem.NOT_A_ZIP, "not a readable zip archive")
    missing = DOCX_REQUIRED_MEMBERS - {member.filename for member in members}
    if missing:
        raise DocxArchiveRejected(ArchiveProblem.NOT_DOCX, f"zip lacks {sorted(missing)}")
    encrypted = [member.filename for member in members if member.flag_bits & _ENCRYPTED_FLAG]
    if encrypted:
        raise DocxArchiveRejected(ArchiveProblem.ENCRYPTED, f"encrypted members: {encrypted[:5]}")
    total = 0
    for member in members:
        size, packed = member.file_size, max(member.compress_size, 1)
        xml = member.filename.endswith((".xml", ".rels"))
        if size > limits.max_member_bytes or (xml and size > limits.max_xml_member_bytes):
            raise DocxArchiveRejected(
                ArchiveProblem.TOO_LARGE, f"{member.filename!r} expands to {size} bytes"
            )
        if size > limits.ratio_floor_bytes and size > limits.max_ratio * packed:
            raise DocxArchiveRejected(
                ArchiveProblem.TOO_LARGE,
                f"{member.filename!r} expands {size / packed:.0f}x ({packed} -> {size} bytes)",
            )
        total += size
    if total > limits.max_total_bytes:
        raise DocxArchiveRejected(ArchiveProblem.TOO_LARGE, f"members expand to {total} bytes in total")


_DOCX_MESSAGES = {
    ArchiveProblem.TOO_MANY_ENTRIES: "This DOCX file has too many internal parts to open safely.",
    ArchiveProblem.TOO_LARGE: "This DOCX file expands to more data than can be opened safely.",
    ArchiveProblem.ENCRYPTED: (
        "This DOCX file has password-protected parts. Remove the password and upload it again."
    ),
}


def _docx_rejection(problem: ArchiveProblem, detail: str) -> UploadRejected:
    message = _DOCX_MESSAGES.get(problem)
    if message is None:  # not a zip, or a zip without the DOCX parts: simply not a type we take
        return UploadRejected(RejectCode.UNSUPPORTED_TYPE, UNSUPPORTED_MESSAGE, detail=detail)
    return UploadRejected(RejectCode.DOCX_BOMB, message, detail=f"{problem}: {detail}")


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
