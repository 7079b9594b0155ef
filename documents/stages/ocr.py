"""OCR: only the pages that need it, in batches, with a checkpoint after each batch and progress
after each page (throttled like every progress report), so a slow batch does not look frozen.

Each page is rendered and recognised in the sandbox child (:mod:`documents.sandbox.runner`,
:mod:`documents.sandbox.ocr_page`), one call per page: a render bomb or an engine spinning on a
hostile image is killed at its limits (``resource_limit``, ``ocr_timeout``) or on a cancel, while
this worker keeps heartbeating. A call costs a few milliseconds beside seconds of OCR per page
(bench/README.md, the sandbox section).

Skipped (counting as done) when no page needs OCR: the parse stage already says so, and the job
passes over OCR without running it; this handler still skips if it is reached anyway. Retry
hints from the ``ocr_timeout`` policy halve the batch and then switch to the alternative engine.
"""

from __future__ import annotations

from django.conf import settings
from django.db.models import F

from documents.causes import OCR_TIMEOUT
from documents.engines import ocr
from documents.models import DocumentVersion, Page
from documents.sandbox.ocr_page import OcrOptions
from documents.sandbox.runner import sandbox_call
from documents.stages.common import local_file, version_of
from jobs.context import StageContext


def engine_for(hints: dict[str, object]) -> str:
    name = ocr.default_engine_name(settings.OCR_ENGINE)
    if hints.get("ocr_engine") == "alternative":
        return ocr.alternative_engine_name(name) or name
    return name


def batch_size_for(hints: dict[str, object]) -> int:
    size = settings.OCR_BATCH_SIZE
    return max(1, size // 2) if hints.get("batch_size") == "halve" else size


def options_for(engine_name: str) -> OcrOptions:
    """What the sandbox child reads a page with: every OCR setting it needs, as plain values (it
    has no settings of its own)."""
    return OcrOptions(
        engine=engine_name,
        dpi=settings.OCR_DPI,
        max_pixels=settings.DOCUMENTS_MAX_RENDER_PIXELS,
        tesseract_timeout=settings.OCR_TESSERACT_TIMEOUT,
        rapidocr_threads=settings.OCR_RAPIDOCR_THREADS,
        languages=settings.OCR_LANGUAGES,
    )


def tesseract_leftover_age() -> float:
    """Seconds after which no live tesseract run can still use its temp files: it is killed at
    its timeout, and its caller removes them right after."""
    return settings.OCR_TESSERACT_TIMEOUT + 60


def run(ctx: StageContext) -> None:
    version = version_of(ctx)
    numbers = list(
        Page.objects.filter(version=version, needs_ocr=True)
        .order_by("number")
        .values_list("number", flat=True)
    )
    if not numbers:
        ctx.skip()
        return
    if (
        version.reused_from_id is not None
        and not Page.objects.filter(version=version, needs_ocr=True, ocr_engine="").exists()
    ):
        # Dedup: the parse stage copied these pages with the text OCR read from the same bytes.
        ctx.progress(len(numbers), len(numbers))
        return
    engine_name = engine_for(ctx.hints)
    ocr.get_engine(engine_name)  # installed here too (cheap): else ocr_engine_unavailable before any page
    options = options_for(engine_name).as_dict()
    size = batch_size_for(ctx.hints)
    path = str(local_file(ctx, version))
    done = int(ctx.checkpoint.get("done", 0))
    ctx.progress(done, len(numbers))
    while done < len(numbers):
        batch = numbers[done : done + size]
        texts = {}
        for position, number in enumerate(batch, start=1):
            ctx.check()
            # In the sandbox child: this thread waits on its pipe, checking for a cancel, a lost
            # lease and the stage deadline (the watchdog keeps heartbeating meanwhile).
            answer = sandbox_call(
                "recognize_page",
                path,
                version.kind,
                number,
                options,
                source=path,
                check=ctx.check,
                timeout_code=OCR_TIMEOUT.code,
            )
            # A white page (e.g. a background rectangle) has nothing to read and is not counted.
            if not answer["blank"]:
                _count_attempt(version, number)
            texts[number] = str(answer["text"])
            if position < len(batch):
                # Pages recognised so far (their text commits with the batch's checkpoint
                # below, which also reports the batch's last page).
                ctx.progress(done + position, len(numbers))
            else:
                ctx.touch()
        done += len(batch)
        with ctx.write(checkpoint={"done": done, "engine": engine_name}, done=done, total=len(numbers)):
            for number, text in texts.items():
                Page.objects.filter(version=version, number=number).update(text=text, ocr_engine=engine_name)


def _count_attempt(version: DocumentVersion, number: int) -> None:
    # Unfenced on purpose: it counts real work (operators and tests see pages OCR'd twice). Counted
    # when the page's text is back: a page whose child was killed mid-OCR is not counted.
    Page.objects.filter(version=version, number=number).update(ocr_attempts=F("ocr_attempts") + 1)
