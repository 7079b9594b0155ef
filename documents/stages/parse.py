"""Parsing: text and structure page by page, with a checkpoint after each flushed batch of pages."""

from __future__ import annotations

import time

from documents.causes import EMPTY_INPUT
from documents.engines.parsing import ParsedPage, page_count, parse
from documents.engines.sniff import Kind
from documents.models import DocumentVersion, Page
from documents.stages.common import local_file, version_of
from jobs.context import StageContext
from jobs.errors import StageFailure

# Pages are written in batches: every FLUSH_PAGES pages or FLUSH_SECONDS, whichever comes first,
# so a fast text PDF is not slowed by a write per page and a slow one still checkpoints often.
FLUSH_PAGES = 50
FLUSH_SECONDS = 1.0


def run(ctx: StageContext) -> None:
    version = version_of(ctx)
    kind = Kind(version.kind)
    path = local_file(ctx, version)
    total = page_count(path, kind)
    start = int(ctx.checkpoint.get("next_page", 0))
    batch: list[ParsedPage] = []
    last_flush, written = time.monotonic(), start
    for page in parse(path, kind, start_page=start):
        batch.append(page)
        if len(batch) >= FLUSH_PAGES or time.monotonic() - last_flush >= FLUSH_SECONDS:
            written = _flush(ctx, version, batch, total)
            batch, last_flush = [], time.monotonic()
        else:
            ctx.touch()
    if batch:
        written = _flush(ctx, version, batch, total)
    if written != total:  # an empty file, or a resume at the end: the stage's end still counts
        ctx.progress(total, total)
    pages = Page.objects.filter(version=version)
    if not pages.exclude(text="").exists() and not pages.filter(needs_ocr=True).exists():
        raise StageFailure(EMPTY_INPUT.code, "no page has text and none needs OCR")


def _flush(ctx: StageContext, version: DocumentVersion, pages: list[ParsedPage], total: int) -> int:
    """Write a batch of pages with its checkpoint and progress; the last page number written."""
    rows = [
        Page(
            version=version,
            number=p.number,
            text=p.text,
            needs_ocr=p.needs_ocr,
            blocks=_structure(p),
        )
        for p in pages
    ]
    # Page numbers start at 1: the last page written is also how many are done.
    with ctx.write(checkpoint={"next_page": rows[-1].number}, done=rows[-1].number, total=total):
        Page.objects.bulk_create(rows, ignore_conflicts=True)
    return rows[-1].number


def _structure(page: ParsedPage) -> list[dict[str, object]]:
    """The page's blocks as stored; none for a page of plain paragraphs (every PDF page), whose
    text already says it all: the chunker splits it at its blank lines into the same paragraphs,
    and the text is not encoded and stored a second time."""
    if all(block.kind == "paragraph" for block in page.blocks):
        return []
    return [{"kind": b.kind, "text": b.text, "level": b.level} for b in page.blocks]
