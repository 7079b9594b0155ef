"""Parsing: text and structure page by page, read in the sandbox, with a checkpoint per batch.

Each batch of pages is one call to the sandbox child (:mod:`documents.sandbox.runner`): the worker thread
only waits on a pipe, so heartbeats and cancel keep flowing whatever the parser does, and a call
per batch (not per page) keeps the sandbox's cost per page small.
"""

from __future__ import annotations

from django.conf import settings
from django.db.models import Q

from documents.bulk_insert import insert_rows
from documents.causes import EMPTY_INPUT
from documents.engines.parsing import Block, ParsedPage
from documents.models import DocumentVersion, Page
from documents.sandbox.runner import parse_limits, sandbox_call
from documents.services.dedup import copy_pages, source_of
from documents.stages.common import local_file, version_of
from jobs.context import StageContext
from jobs.errors import StageFailure

PAGE_FIELDS = ("version_id", "number", "text", "needs_ocr", "blocks", "ocr_engine", "ocr_attempts")


def run(ctx: StageContext) -> None:
    version = version_of(ctx)
    source = source_of(version)
    if source is not None:  # dedup: the same bytes' verified pages, copied (no parser runs)
        total = Page.objects.filter(version=source).count()
        if total:
            with ctx.write(checkpoint={"reused_from": str(source.pk)}, done=total, total=total):
                copy_pages(source, version)
            return
    path = local_file(ctx, version)
    limits = parse_limits()
    batch_pages = max(1, settings.DOCUMENTS_PARSE_BATCH_PAGES)
    start = int(ctx.checkpoint.get("next_page", 0))
    text_chars = int(ctx.checkpoint.get("text_chars", 0))
    total = written = start
    while True:
        answer = sandbox_call(
            "parse_pages",
            str(path),
            version.kind,
            start,
            batch_pages,
            limits.as_dict(),
            source=path,
            check=ctx.check,
        )
        total = int(answer["total"])
        pages = [_page(item) for item in answer["pages"]]
        if not pages:
            break
        text_chars += sum(len(page.text) for page in pages)
        limits.check_text_length(text_chars)
        written = _flush(ctx, version, pages, total, text_chars)
        start = written
        if written >= total:
            break
    if written != total:  # an empty file, or a resume at the end: the stage's end still counts
        ctx.progress(total, total)
    # One read answers both questions: a page that needs OCR comes first, then one with text.
    first = (
        Page.objects.filter(Q(needs_ocr=True) | ~Q(text=""), version=version)
        .order_by("-needs_ocr")
        .values_list("needs_ocr", flat=True)
        .first()
    )
    if first is None:
        raise StageFailure(EMPTY_INPUT.code, "no page has text and none needs OCR")
    if not first:
        # Decided here, so the job passes over OCR in the transition that ends parsing: a text
        # PDF never shows "OCR running" before OCR turns out to have nothing to do.
        ctx.skip_following("ocr")


def _page(item: dict[str, object]) -> ParsedPage:
    blocks = item["blocks"]
    assert isinstance(blocks, list)
    return ParsedPage(
        number=int(str(item["number"])),
        text=str(item["text"]),
        needs_ocr=bool(item["needs_ocr"]),
        blocks=tuple(Block(kind, text, level) for kind, text, level in blocks),
    )


def _flush(
    ctx: StageContext, version: DocumentVersion, pages: list[ParsedPage], total: int, text_chars: int
) -> int:
    """Write a batch of pages with its checkpoint and progress; the last page number written."""
    rows = [(version.pk, p.number, p.text, p.needs_ocr, _structure(p), "", 0) for p in pages]
    # Page numbers start at 1: the last page written is also how many are done.
    last = pages[-1].number
    checkpoint = {"next_page": last, "text_chars": text_chars}
    with ctx.write(checkpoint=checkpoint, done=last, total=total):
        insert_rows(Page, PAGE_FIELDS, rows, skip_existing=True)
    return last


def _structure(page: ParsedPage) -> list[dict[str, object]]:
    """The page's blocks as stored; none for a page of plain paragraphs (every PDF page), whose
    text already says it all: the chunker splits it at its blank lines into the same paragraphs,
    and the text is not encoded and stored a second time."""
    if all(block.kind == "paragraph" for block in page.blocks):
        return []
    return [{"kind": b.kind, "text": b.text, "level": b.level} for b in page.blocks]
