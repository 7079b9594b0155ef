"""OCR: only the pages that need it, in batches, with a checkpoint after each batch.

Skipped (counting as done) when no page needs OCR. Retry hints from the ``ocr_timeout`` policy
halve the batch and then switch to the alternative engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db.models import F
from PIL import Image

from documents.engines import ocr
from documents.engines.parsing import pdf_renderer, render_image_page
from documents.engines.sniff import Kind
from documents.models import DocumentVersion, Page
from documents.stages.common import local_file, version_of
from jobs.context import StageContext


def engine_for(hints: dict[str, object]) -> str:
    name = ocr.default_engine_name()
    if hints.get("ocr_engine") == "alternative":
        return ocr.alternative_engine_name(name) or name
    return name


def batch_size_for(hints: dict[str, object]) -> int:
    size = int(settings.OCR_BATCH_SIZE)
    return max(1, size // 2) if hints.get("batch_size") == "halve" else size


BLANK_LEVEL = 245  # grayscale: a page whose darkest pixel is lighter than this has no text
PREVIEW_DPI = 24  # enough to tell a blank page from one with text, at a tiny fraction of the cost


@contextmanager
def page_images(path: Path, kind: Kind) -> Iterator[Callable[[int], Image.Image | None]]:
    """``image(number)``: the page rendered for OCR, or None when the page is blank."""
    if kind is not Kind.PDF:
        yield lambda number: None if is_blank(image := render_image_page(path, number)) else image
        return
    with pdf_renderer(path, max_pixels=int(settings.DOCUMENTS_MAX_RENDER_PIXELS)) as render:

        def image(number: int) -> Image.Image | None:
            if is_blank(render(number, PREVIEW_DPI)):
                return None
            return render(number, int(settings.OCR_DPI))

        yield image


def is_blank(image: Image.Image) -> bool:
    darkest, _ = image.convert("L").getextrema()
    return isinstance(darkest, int | float) and darkest >= BLANK_LEVEL


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
    engine = ocr.get_engine(engine_name)
    size = batch_size_for(ctx.hints)
    path = local_file(ctx, version)
    kind = Kind(version.kind)
    done = int(ctx.checkpoint.get("done", 0))
    ctx.progress(done, len(numbers))
    with page_images(path, kind) as images:
        while done < len(numbers):
            batch = numbers[done : done + size]
            texts = {}
            for number in batch:
                ctx.check()
                image = images(number)
                if image is None:
                    texts[number] = ""  # a white page (e.g. a background rectangle): nothing to read
                else:
                    _count_attempt(version, number)
                    texts[number] = engine.recognize(image)
                ctx.touch()
            done += len(batch)
            with ctx.write(checkpoint={"done": done, "engine": engine_name}, done=done, total=len(numbers)):
                for number, text in texts.items():
                    Page.objects.filter(version=version, number=number).update(
                        text=text, ocr_engine=engine_name
                    )


def _count_attempt(version: DocumentVersion, number: int) -> None:
    # Unfenced on purpose: it counts real work (operators and tests see pages OCR'd twice).
    Page.objects.filter(version=version, number=number).update(ocr_attempts=F("ocr_attempts") + 1)
