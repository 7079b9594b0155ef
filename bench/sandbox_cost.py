"""The parsing sandbox's cost: the same text PDF parsed in this process and through the sandbox;
and the same scanned PDF OCR'd in this process and through the sandbox.

Parsing: (a) ``documents.engines.parsing.parse`` in-process, every page; (b) the parse stage's
way: ``sandbox_call("parse_pages", ...)`` in batches of ``DOCUMENTS_PARSE_BATCH_PAGES`` to a warm
child (the one a worker keeps), and (c) the first call of a worker, which starts its child.
Reported: the added milliseconds per page (b - a) / pages and the child start. Medians of runs.

OCR (``--ocr-pages``, 0 to leave it out): a PDF of scanned pages (an image of text each, no
text layer). (a) in-process, what the OCR stage did before the sandbox: one renderer for the PDF,
a blank check on a preview render, the render at ``OCR_DPI`` and the engine, page by page;
(b) the stage's way now: ``sandbox_call("recognize_page", ...)`` per page to a warm child that
keeps the PDF open and the engine loaded. Both use the engine the settings choose.

    .venv/bin/python bench/sandbox_cost.py [--quick] [--pages N] [--runs N] [--ocr-pages N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.common import say


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    common.common_args(parser)
    parser.add_argument("--pages", type=int, default=None, help="PDF pages (default 300, --quick 100).")
    parser.add_argument("--runs", type=int, default=None, help="Timed runs (default 5, --quick 3).")
    parser.add_argument(
        "--ocr-pages",
        type=int,
        default=None,
        help="Scanned PDF pages for OCR (default 12, --quick 6; 0: none).",
    )
    args = parser.parse_args()
    ocr_pages = args.ocr_pages if args.ocr_pages is not None else (6 if args.quick else 12)
    pages = args.pages or (100 if args.quick else 300)
    runs = args.runs or (3 if args.quick else 5)
    common.header(f"sandbox cost: a {pages}-page text PDF parsed in-process and in the sandbox child")
    common.print_machine()
    with common.temp_dir("sandbox", args.keep) as tmp:
        common.setup_django(common.base_env(settings="config.settings", database_url="", var_dir=tmp))
        from django.conf import settings

        from documents.engines.parsing import parse
        from documents.engines.sniff import Kind
        from documents.sandbox import runner as sandbox

        pdf = tmp / "bench.pdf"
        pdf.write_bytes(common.text_pdf(pages))
        limits = sandbox.parse_limits().as_dict()
        batch = int(settings.DOCUMENTS_PARSE_BATCH_PAGES)

        def in_process() -> int:
            return sum(1 for _ in parse(pdf, Kind.PDF))

        def in_sandbox() -> int:
            done = 0
            while done < pages:
                answer = sandbox.sandbox_call("parse_pages", str(pdf), "pdf", done, batch, limits, source=pdf)
                done += len(answer["pages"])
            return done

        from documents.sandbox import isolation

        def first_call() -> float:
            sandbox.discard_idle()
            started = time.perf_counter()
            sandbox.sandbox_call("parse_pages", str(pdf), "pdf", 0, 1, limits, source=pdf)
            return time.perf_counter() - started

        # A child serves one document, so every document pays a child start: walled in (bubblewrap,
        # where it works here) and without walls (bwrap hidden from the runner), alternated.
        walled = sandbox.sandbox_walls().isolated
        starts, unwalled = [], []
        for _ in range(runs):
            starts.append(first_call())
            if walled:
                found = isolation.bwrap
                isolation.bwrap = lambda: None
                try:
                    unwalled.append(first_call())
                finally:
                    isolation.bwrap = found
        plain, boxed = [], []
        for _ in range(runs):  # alternated, so that drift hits both alike
            started = time.perf_counter()
            assert in_process() == pages
            plain.append(time.perf_counter() - started)
            started = time.perf_counter()
            assert in_sandbox() == pages
            boxed.append(time.perf_counter() - started)
        sandbox.discard_idle()
        a, b, c = common.median(plain), common.median(boxed), common.median(starts)
        say(f"in-process parse: {a:.3f} s ({a / pages * 1000:.2f} ms/page), median of {runs}")
        say(f"sandbox, warm child, batches of {batch}: {b:.3f} s ({b / pages * 1000:.2f} ms/page)")
        say(f"added per page: {(b - a) / pages * 1000:+.2f} ms ({b / a:.2f}x the parse alone)")
        say(f"first call of a child (start + imports + one page), walls {walled}: {c * 1000:.0f} ms")
        if unwalled:
            d = common.median(unwalled)
            say(f"the same without walls: {d * 1000:.0f} ms (walls: {(c - d) * 1000:+.0f} ms per child)")
        if ocr_pages:
            ocr_cost(tmp, ocr_pages, runs)
    return 0


def scanned_pdf(pages: int) -> bytes:
    """``pages`` pages, each one image of a few lines of text (no text layer), as a scan is."""
    from fpdf import FPDF
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=40)
    pdf = FPDF(format="A4")
    for number in range(1, pages + 1):
        image = Image.new("L", (1600, 700), 255)
        draw = ImageDraw.Draw(image)
        for line in range(6):
            draw.text(
                (60, 60 + line * 100),
                f"Page {number} line {line}: harbor invoice {number * 7 + line}",
                font=font,
            )
        pdf.add_page()
        pdf.image(image, x=15, y=20, w=180)
    return bytes(pdf.output())


def white_pdf(pages: int) -> bytes:
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    for _ in range(pages):
        pdf.add_page()
    return bytes(pdf.output())


def ocr_cost(tmp: Path, pages: int, runs: int) -> None:
    from django.conf import settings

    from documents.causes import OCR_TIMEOUT
    from documents.engines import ocr
    from documents.engines.parsing import pdf_renderer
    from documents.sandbox import runner as sandbox
    from documents.sandbox.ocr_page import PREVIEW_DPI, is_blank
    from documents.stages.ocr import engine_for, options_for

    name = engine_for({})  # OCR_ENGINE when installed, as the OCR stage chooses
    engine = ocr.get_engine(name)
    options = options_for(name)
    pdf = tmp / "scanned.pdf"
    pdf.write_bytes(scanned_pdf(pages))
    say()
    say(f"OCR: a {pages}-page scanned PDF, engine {name}, {options.dpi} dpi")

    def in_process() -> int:
        read = 0
        with pdf_renderer(pdf, max_pixels=options.max_pixels) as render:
            for number in range(1, pages + 1):
                if not is_blank(render(number, PREVIEW_DPI)):
                    read += bool(engine.recognize(render(number, options.dpi)))
        return read

    def in_sandbox() -> int:
        read = 0
        for number in range(1, pages + 1):
            answer = sandbox.sandbox_call(
                "recognize_page",
                str(pdf),
                "pdf",
                number,
                options.as_dict(),
                source=pdf,
                timeout_code=OCR_TIMEOUT.code,
            )
            read += bool(answer["text"])
        return read

    in_process()  # the engine loads once per process (rapidocr's models): not part of a page's cost
    sandbox.discard_idle()
    started = time.perf_counter()
    sandbox.sandbox_call("recognize_page", str(pdf), "pdf", 1, options.as_dict(), source=pdf)
    first = time.perf_counter() - started
    plain, boxed = [], []
    for _ in range(runs):  # alternated, so that drift hits both alike
        started = time.perf_counter()
        assert in_process() == pages
        plain.append(time.perf_counter() - started)
        started = time.perf_counter()
        assert in_sandbox() == pages
        boxed.append(time.perf_counter() - started)
    # The fixed price of a call, without OCR's noise: white pages (a preview render and the
    # blank check, the same in both ways) through the same code.
    white = tmp / "white.pdf"
    white_pages = 100
    white.write_bytes(white_pdf(white_pages))
    empty_plain, empty_boxed = [], []
    for _ in range(runs):
        started = time.perf_counter()
        with pdf_renderer(white, max_pixels=options.max_pixels) as render:
            assert all(is_blank(render(n, PREVIEW_DPI)) for n in range(1, white_pages + 1))
        empty_plain.append(time.perf_counter() - started)
        started = time.perf_counter()
        for number in range(1, white_pages + 1):
            answer = sandbox.sandbox_call(
                "recognize_page", str(white), "pdf", number, options.as_dict(), source=white
            )
            assert answer["blank"]
        empty_boxed.append(time.perf_counter() - started)
    sandbox.discard_idle()
    a, b = common.median(plain), common.median(boxed)
    e_a, e_b = common.median(empty_plain), common.median(empty_boxed)
    say(
        f"white pages, blank check only: in-process {e_a / white_pages * 1000:.2f} ms/page, "
        f"sandbox {e_b / white_pages * 1000:.2f} ms/page: {(e_b - e_a) / white_pages * 1000:+.2f} ms per call"
    )
    say(f"in-process render + OCR: {a:.2f} s ({a / pages * 1000:.0f} ms/page), median of {runs}")
    say(f"sandbox, warm child, a call per page: {b:.2f} s ({b / pages * 1000:.0f} ms/page)")
    say(f"added per page: {(b - a) / pages * 1000:+.1f} ms ({b / a:.3f}x the OCR alone)")
    say(f"first OCR call of a worker (child start, engine load, one page): {first * 1000:.0f} ms")
    if int(settings.OCR_BATCH_SIZE) and b > a * 1.1:
        say("note: over 10% added; see bench/README.md (the sandbox section)")


if __name__ == "__main__":
    raise SystemExit(main())
