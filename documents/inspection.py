"""What a user may inspect of a version: its chunks (what search reads) and, for the published
version only, the verified extracted text as a download.

Only a published version's text is offered for download: publishing is what says its outputs
passed every stage (parsed, OCR'd, chunked, embedded, indexed and found by the probe). Chunks of
an unpublished version are shown for inspection (e.g. why a version failed at embedding), never
as a verified result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from documents.models import Chunk, Document, DocumentVersion, Page


class NotPublished(Exception):
    """The version exists but is not the published one: ``code`` and a user-safe ``message``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def version_of(document: Document, number: Any) -> DocumentVersion | None:
    try:
        number = int(number)
    except (TypeError, ValueError):
        return None
    return document.versions.filter(number=number, deleted_at=None).select_related("job").first()


def chunks_of(version: DocumentVersion) -> QuerySet[Chunk]:
    return Chunk.objects.filter(version=version).order_by("ordinal")


def ocr_engines(version: DocumentVersion, first: int, last: int) -> dict[int, str]:
    """Page number -> OCR engine, for the pages of ``first..last`` that OCR read (one query)."""
    rows = Page.objects.filter(version=version, number__gte=first, number__lte=last).exclude(ocr_engine="")
    return dict(rows.values_list("number", "ocr_engine"))


@dataclass(frozen=True)
class ChunkView:
    ordinal: int
    text: str
    page_start: int
    page_end: int
    heading_path: list[str]
    ocr_engine: str | None  # the engine that read its pages, when OCR made its text


def chunk_views(version: DocumentVersion, chunks: list[Chunk]) -> list[ChunkView]:
    """The page's chunks with the OCR engine of their pages (one query for the whole page)."""
    if not chunks:
        return []
    engines = ocr_engines(version, min(c.page_start for c in chunks), max(c.page_end for c in chunks))
    views = []
    for chunk in chunks:
        used = sorted({engines[p] for p in range(chunk.page_start, chunk.page_end + 1) if p in engines})
        views.append(
            ChunkView(
                ordinal=chunk.ordinal,
                text=chunk.text,
                page_start=chunk.page_start,
                page_end=chunk.page_end,
                heading_path=list(chunk.heading_path or []),
                ocr_engine=",".join(used) or None,
            )
        )
    return views


def published_text(document: Document, version: DocumentVersion) -> str:
    """The verified extracted text of the published version, page by page (pages separated by a
    form feed, as ``pdftotext`` does). :class:`NotPublished` for any other version."""
    if document.published_version_id != version.pk:
        if version.superseded_at is not None:
            raise NotPublished("version_superseded", "A newer version replaced this one; download that one.")
        raise NotPublished(
            "version_not_published", "This version is not published (still processing, failed or cancelled)."
        )
    pages = Page.objects.filter(version=version).order_by("number").values_list("text", flat=True)
    return "\f".join(text.rstrip("\n") + "\n" for text in pages.iterator(chunk_size=200))


def download_name(version: DocumentVersion) -> str:
    stem = version.original_name.rsplit(".", 1)[0] or "document"
    return f"{stem}-v{version.number}.txt"
