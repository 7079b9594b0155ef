"""Malformed and hostile files, generated at test time, each with the outcome the platform owes it.

An outcome is either a rejection at upload (with its ``UploadRejected`` code) or the end state of
the file's job: ``ready`` where the file is legitimately readable, otherwise ``failed`` with one
specific cause code. ``internal_error`` is never an acceptable outcome, and neither is a hang.
Every generator is deterministic (seeded) and builds in well under a second, except the
5,000-page PDFs (about two seconds).
"""

from __future__ import annotations

import functools
import io
import random
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass

from fpdf import FPDF

from tests.documents import files

# --- outcomes ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rejected:
    """Refused by ``document_upload`` with this ``UploadRejected.code``; nothing is stored."""

    code: str


@dataclass(frozen=True)
class Ends:
    """The job ends in ``status`` (``ready`` or ``failed``) with ``code`` (failed only) at ``stage``."""

    status: str
    code: str = ""
    stage: str = ""


READY = Ends("ready")


def failed(code: str, stage: str = "parsing") -> Ends:
    return Ends("failed", code, stage)


@dataclass(frozen=True)
class Hostile:
    name: str
    filename: str
    make: Callable[[], bytes]
    expected: Rejected | Ends
    deadline: float = 30.0  # seconds from upload to the job's end, on this 2-core machine
    why: str = ""
    findable: str = ""  # ready files: a query that must find this version at once
    absent: str = ""  # text that must not reach any chunk (scripts, styles)
    needs_ocr: bool = False
    bug: str = ""  # set while a known bug makes this case fail: the test is then a strict xfail


# --- damage ------------------------------------------------------------------------------------


def flip_every(data: bytes, *, every: int, start: int = 16) -> bytes:
    """Every ``every``-th byte from ``start`` on inverted; the header before ``start`` survives, so
    the file still sniffs as what it was."""
    damaged = bytearray(data)
    for index in range(start, len(damaged), every):
        damaged[index] ^= 0xFF
    return bytes(damaged)


def flip_random_bits(data: bytes, *, count: int, seed: int, start: int = 16) -> bytes:
    """``count`` single bits flipped at seeded random positions after ``start``."""
    rng = random.Random(seed)
    damaged = bytearray(data)
    for _ in range(count):
        index = rng.randrange(start, len(damaged))
        damaged[index] ^= 1 << rng.randrange(8)
    return bytes(damaged)


def flip_tail(data: bytes, *, fraction: float, every: int = 3) -> bytes:
    """The last ``fraction`` of the file (cross-reference table and trailer) damaged."""
    return flip_every(data, every=every, start=int(len(data) * (1 - fraction)))


def junk(size: int, *, seed: int, prefix: bytes = b"") -> bytes:
    return prefix + random.Random(seed).randbytes(size)


# --- PDFs --------------------------------------------------------------------------------------

LONG_PDF_PAGES = 5_000


def encrypted_pdf_unknown_scheme() -> bytes:
    """A PDF encrypted with a security handler PDFium does not know (``/Filter /ExoticSecurity``).

    (fpdf2's AES methods need the ``cryptography`` package, which the project does not install.)
    """
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>",
        b"<< /Filter /ExoticSecurity /V 9 /R 9 /O (owner) /U (user) /P -4 >>",
    ]
    file_id = b"<00112233445566778899aabbccddeeff>"
    return files.assemble_pdf(objects, trailer=b" /Encrypt 4 0 R /ID [%s %s]" % (file_id, file_id))


def wrong_startxref(data: bytes) -> bytes:
    """The ``startxref`` offset pointing at the wrong place (a common result of a bad edit)."""
    match = re.search(rb"startxref\n(\d+)", data)
    assert match is not None
    return data[: match.start(1)] + b"12" + data[match.end(1) :]


def damaged_xref_table(data: bytes) -> bytes:
    """The cross-reference table inverted byte by byte; every object is intact."""
    start = data.rfind(b"xref")
    return data[:start] + bytes(byte ^ 0xFF for byte in data[start : start + 200]) + data[start + 200 :]


@functools.cache
def blank_pages_pdf(pages: int = LONG_PDF_PAGES) -> bytes:
    """``pages`` pages with nothing at all on them (an empty content stream each)."""
    pdf = FPDF()
    pdf.set_creation_date(files._FIXED_DATE)
    for _ in range(pages):
        pdf.add_page()
    return bytes(pdf.output())


@functools.cache
def white_pages_pdf(pages: int = LONG_PDF_PAGES) -> bytes:
    """``pages`` pages that look blank but have a white rectangle painted over the whole page,
    as many generators and scanners' "blank page" exports do: nothing to read, yet not empty."""
    pdf = FPDF()
    pdf.set_creation_date(files._FIXED_DATE)
    pdf.set_fill_color(255, 255, 255)
    for _ in range(pages):
        pdf.add_page()
        pdf.rect(0, 0, pdf.w, pdf.h, style="F")
    return bytes(pdf.output())


# --- archives ----------------------------------------------------------------------------------


def docx_without_document_part() -> bytes:
    """A zip with ``[Content_Types].xml`` but no ``word/document.xml``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(files._fixed_info("[Content_Types].xml"), files._MINIMAL_CONTENT_TYPES)
        archive.writestr(files._fixed_info("word/styles.xml"), b"<styles/>")
    return buffer.getvalue()


# --- text --------------------------------------------------------------------------------------


def huge_single_line(megabytes: int = 4) -> bytes:
    """Words separated by spaces and no newline at all, ``megabytes`` long."""
    words = ("harbor", "falcon", "orchard", "lantern", "cobalt", "meadow", "quarry", "signal")
    rng = random.Random(7)
    out: list[str] = []
    size = 0
    while size < megabytes * 1024 * 1024:
        word = rng.choice(words)
        out.append(word)
        size += len(word) + 1
    return " ".join(out).encode()


def one_giant_word(megabytes: int = 2) -> bytes:
    return b"a" * (megabytes * 1024 * 1024)


def hex_dump_line(values: int = 20_000) -> bytes:
    """A label and 160 KB of hexadecimal digits with no space: a checksum list or a key dump."""
    return b"Checksum list: " + "".join(f"{i:08x}" for i in range(values)).encode() + b"\n"


def mixed_encodings() -> bytes:
    """UTF-8, GB18030 and Latin-1 fragments in one file, as a careless concatenation leaves them.

    No single codec decodes it, so it is refused as not text (``unsupported_type``).
    """
    parts = [
        "Harbor notes in UTF-8: café, naïve, 港口。\n".encode(),
        "渔船在黎明出发。\n".encode("gb18030"),
        "Latin-1 tail: déjà vu, façade.\n".encode("latin-1"),
    ]
    return b"".join(parts) * 20


def nested_html(depth: int = 20_000) -> bytes:
    return (
        "<html><body>" + "<div>" * depth + "Deep harbor text." + "</div>" * depth + "</body></html>"
    ).encode()


def html_only_scripts() -> bytes:
    return (
        b"<!DOCTYPE html><html><head><script>var a = 'SCRIPT_ONLY';</script></head>"
        b"<body><script>document.write('SCRIPT_ONLY')</script><style>p{}</style></body></html>"
    )


# --- files that hang a parser (for the real-cluster test) -----------------------------------------


def markdown_heading_of_spaces(spaces: int = 1_000_000) -> bytes:
    """A Markdown heading marker, a word, a million spaces and a word: one line, 1 MB.

    ``documents/parsers/markup.py`` matches every line against ``_MD_ATX_HEADING``, whose lazy
    title group and optional closing sequence backtrack over the run of spaces quadratically:
    16,000 spaces take 6 s, a million take hours, in one C call that holds the GIL.
    """
    return b"# a" + b" " * spaces + b"b\n"


def dot_run_paragraph(dots: int = 1_000_000) -> bytes:
    """Plain text: 400 words, then a million dots and a lowercase word, in one paragraph.

    ``documents/engines/chunking.py`` splits paragraphs above the target size at sentence ends
    with ``_SENTENCE_END``, whose ``[.!?]+`` run and look-ahead backtrack quadratically over a long
    run of dots followed by a lowercase word (32,000 dots: 47 s).
    """
    return b"word " * 400 + b"x" + b"." * dots + b" a\n"


def markdown_bracket_line(brackets: int = 2_000_000) -> bytes:
    """Normal Markdown, then one line of two million ``[``: the link
    pattern used to rescan the rest of the line from every ``[`` (16k/32k/64k: 1.0/3.6/13.6 s)."""
    return b"# Harbor log\n\nBoats left at dawn, as **always**.\n\n" + b"[" * brackets + b"\n"


def huge_page_pdf(points: int = 14_400) -> bytes:
    """A few hundred bytes: one ``points`` x ``points`` page with a drawn box and no text layer
    (docs/limits.md: the pixel cap), so OCR renders it: 40,000 x 40,000 pixels at 200 dpi (7.9 GB)."""
    drawing = b"0 0 m 500 500 l S"
    return files.assemble_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Contents 4 0 R >>" % (points, points),
            b"<< /Length %d >>\nstream\n%s\nendstream" % (len(drawing), drawing),
        ]
    )


def noise_png(side: int = 2_000, *, seed: int = 16) -> bytes:
    """A ``side`` x ``side`` page of black and white pixel noise (about 0.5 MB): no text, but
    tesseract works on it for seconds of CPU (3.6 s at 3,000 px here) looking for some, and
    rapidocr too. Under a small CPU budget it stands for any image that makes OCR spin."""
    from PIL import Image

    rng = random.Random(seed)
    return files.image_bytes(Image.frombytes("1", (side, side), rng.randbytes(side * side // 8)), "PNG")


@functools.cache
def shared_stream_pages_pdf(pages: int = 60_000) -> bytes:
    """``pages`` pages that all show one shared content stream (5.8 MB that once became
    60,008 index entries)."""
    text = b"BT /F1 12 Tf 72 720 Td (Harbor page) Tj ET"
    first_page = 5
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>"
        % (b" ".join(b"%d 0 R" % (first_page + i) for i in range(pages)), pages),
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(text), text),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R"
        b" /Resources << /Font << /F1 4 0 R >> >> >>"
    )
    return files.assemble_pdf(objects + [page] * pages)


def docx_huge_document_part(megabytes: int = 30) -> bytes:
    """A DOCX whose ``word/document.xml`` expands to ``megabytes`` MB of ordinary paragraphs
    (95 MB inside 12.6 MB once parsed for over 10 minutes at 1.6 GB). Stored,
    not deflated, so the member passes the compression-ratio check and only its size is wrong."""
    paragraph = b"<w:p><w:r><w:t>Harbor ledger line.</w:t></w:r></w:p>"
    body = paragraph * (megabytes * 1024 * 1024 // len(paragraph))
    document = (
        b'<?xml version="1.0" encoding="UTF-8"?>'
        b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'
        + body
        + b"</w:body></w:document>"
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(
            files._fixed_info("[Content_Types].xml", zipfile.ZIP_STORED), files._MINIMAL_CONTENT_TYPES
        )
        archive.writestr(files._fixed_info("word/document.xml", zipfile.ZIP_STORED), document)
    return buffer.getvalue()


# --- the corpus ----------------------------------------------------------------------------------

_TEXT_PDF = files.text_pdf
DOCX_BOMB = "docx_bomb"

CORPUS: tuple[Hostile, ...] = (
    # PDFs: truncated, bit-flipped, encrypted, empty, long and blank
    Hostile(
        "pdf-truncated-half", "half.pdf", lambda: files.truncated(_TEXT_PDF(), 0.5), failed("corrupt_input")
    ),
    Hostile(
        "pdf-truncated-tenth", "tenth.pdf", lambda: files.truncated(_TEXT_PDF(), 0.1), failed("corrupt_input")
    ),
    Hostile("pdf-header-only", "header.pdf", lambda: b"%PDF-1.7\n", failed("corrupt_input")),
    Hostile(
        "pdf-bitflip-dense", "dense.pdf", lambda: flip_every(_TEXT_PDF(), every=7), failed("corrupt_input")
    ),
    Hostile(
        "pdf-bitflip-sparse",
        "sparse.pdf",
        lambda: flip_every(_TEXT_PDF(), every=251),
        failed("corrupt_input"),
    ),
    Hostile(
        "pdf-bitflip-tail",
        "tail.pdf",
        lambda: flip_tail(_TEXT_PDF(), fraction=0.15),
        failed("corrupt_input"),
        why="the damage reaches into the last page's objects, not just the cross-reference table",
    ),
    Hostile(
        "pdf-damaged-xref-table",
        "xref.pdf",
        lambda: damaged_xref_table(_TEXT_PDF()),
        READY,
        why="PDFium rebuilds a damaged cross-reference table by scanning the objects",
        findable="Velvet orchard hums",
    ),
    Hostile(
        "pdf-wrong-startxref",
        "startxref.pdf",
        lambda: wrong_startxref(_TEXT_PDF()),
        READY,
        findable="Cobalt harbor wakes",
    ),
    Hostile(
        "pdf-bitflip-random-bits",
        "bits.pdf",
        lambda: flip_random_bits(_TEXT_PDF(), count=40, seed=11),
        failed("corrupt_input"),
    ),
    Hostile(
        "pdf-damaged-page-object",
        "page.pdf",
        lambda: files.damage_pdf_object(_TEXT_PDF(), files.page_object_numbers(_TEXT_PDF())[1]),
        failed("corrupt_input"),
    ),
    Hostile(
        "pdf-magic-then-junk",
        "junk.pdf",
        lambda: junk(20_000, seed=3, prefix=b"%PDF-1.4\n"),
        failed("corrupt_input"),
    ),
    Hostile("pdf-encrypted-user-password", "secret.pdf", files.encrypted_pdf, failed("encrypted_input")),
    Hostile(
        "pdf-encrypted-unknown-scheme", "exotic.pdf", encrypted_pdf_unknown_scheme, failed("encrypted_input")
    ),
    Hostile(
        "pdf-owner-password-only",
        "owner.pdf",
        files.owner_password_pdf,
        READY,
        why="a permissions-only password does not stop anyone reading it",
        findable="Amber falcon crosses",
    ),
    Hostile("pdf-zero-pages", "zero.pdf", files.zero_page_pdf, failed("empty_input")),
    Hostile(
        "pdf-5000-blank-pages",
        "blank.pdf",
        blank_pages_pdf,
        failed("empty_input"),
        deadline=90,
        why="nothing is drawn on the pages, so none is sent to OCR",
    ),
    # empty and junk
    Hostile("zero-bytes", "empty.pdf", lambda: b"", Rejected("file_empty")),
    Hostile("whitespace-only-text", "blank.txt", lambda: b"  \n\n\t \r\n   ", failed("empty_input")),
    Hostile("binary-junk", "data.bin", lambda: junk(65_536, seed=5), Rejected("unsupported_type")),
    Hostile("binary-junk-named-txt", "notes.txt", lambda: junk(4_096, seed=6), Rejected("unsupported_type")),
    Hostile(
        "text-padded-with-nul-bytes",
        "padded.txt",
        lambda: b"Harbor notes, saved before the crash.\n" + b"\x00" * 4096,
        Rejected("unsupported_type"),
    ),
    # DOCX: bombs, broken parts, not really DOCX
    Hostile("docx-bomb-size", "bomb.docx", lambda: files.docx_bomb(200), Rejected(DOCX_BOMB)),
    Hostile(
        "docx-bomb-ratio",
        "ratio.docx",
        lambda: files.docx_bomb(40),
        Rejected(DOCX_BOMB),
        why="40 MB is under the member limit, but it expands about 1,000 times",
    ),
    Hostile("docx-bomb-entries", "entries.docx", lambda: files.docx_many_entries(5_001), Rejected(DOCX_BOMB)),
    Hostile(
        "docx-encrypted-member",
        "locked.docx",
        files.docx_with_encrypted_member,
        Rejected(DOCX_BOMB),
        why="refused by the zip pre-check with the bomb code (its message says password-protected)",
    ),
    Hostile("docx-broken-xml", "broken.docx", files.docx_with_broken_xml, failed("corrupt_input")),
    Hostile("docx-empty", "empty.docx", files.empty_docx, failed("empty_input")),
    Hostile(
        "docx-without-document-part", "parts.docx", docx_without_document_part, Rejected("unsupported_type")
    ),
    Hostile(
        "docx-truncated",
        "cut.docx",
        lambda: files.truncated(files.docx_document(), 0.6),
        Rejected("unsupported_type"),
    ),
    Hostile("zip-not-docx", "archive.docx", files.zip_of_other_files, Rejected("unsupported_type")),
    # wrong extensions: the content decides
    Hostile("pdf-named-docx", "report.docx", _TEXT_PDF, READY, findable="Cobalt harbor wakes"),
    Hostile(
        "html-named-pdf", "page.pdf", lambda: files.HTML_PAGE.encode(), READY, findable="boats left at dawn"
    ),
    Hostile("docx-named-txt", "notes.txt", files.docx_document, READY, findable="Revenue grew in the north"),
    Hostile(
        "png-named-pdf",
        "scan.pdf",
        lambda: files.png(["WRONG NAME 42"]),
        READY,
        findable="WRONG NAME 42",
        needs_ocr=True,
    ),
    # HTML
    Hostile(
        "html-with-scripts",
        "scripts.html",
        lambda: files.HTML_PAGE.encode(),
        READY,
        findable="boats left at dawn",
        absent="SCRIPT_MARKER",
    ),
    Hostile("html-only-scripts", "scripts-only.html", html_only_scripts, failed("empty_input")),
    Hostile("html-nested-20000-divs", "deep.html", nested_html, READY, findable="Deep harbor text"),
    # text
    Hostile("huge-single-line", "line.txt", huge_single_line, READY, deadline=90, findable="harbor falcon"),
    Hostile("one-giant-word", "word.txt", one_giant_word, READY, deadline=60),
    Hostile(
        "hex-dump-one-line",
        "checksums.txt",
        hex_dump_line,
        READY,
        findable="Checksum list",
    ),
    Hostile(
        "markdown-line-of-brackets",
        "brackets.md",
        markdown_bracket_line,
        failed("line_too_long"),
        why="no backtracking any more (tests/documents/test_backtracking.py), but a 2 MB line is over "
        "the line limit of pattern-based parsing",
    ),
    Hostile(
        "markdown-line-of-brackets-under-the-limit",
        "brackets-short.md",
        lambda: markdown_bracket_line(500_000),
        READY,
        deadline=60,
        findable="Boats left at dawn",
    ),
    Hostile(
        "html-nested-200000-divs",
        "deeper.html",
        lambda: nested_html(200_000),
        failed("nesting_too_deep"),
        why="lexbor's tree building grows with the square of the depth (91 s); a linear count refuses it",
    ),
    Hostile("mixed-encodings", "mixed.txt", mixed_encodings, Rejected("unsupported_type")),
    Hostile(
        "utf16-without-bom",
        "utf16.txt",
        lambda: files.ENGLISH_TEXT.encode("utf-16-le"),
        READY,
        findable="Plain notes from the harbor",
    ),
    # limits (docs/limits.md)
    Hostile(
        "pdf-one-14400pt-page",
        "poster.pdf",
        huge_page_pdf,
        failed("page_too_large", "ocr"),
        needs_ocr=True,
    ),
    Hostile(
        "pdf-60000-pages-one-stream",
        "many.pdf",
        shared_stream_pages_pdf,
        failed("too_many_pages"),
        deadline=60,
    ),
    Hostile("docx-30mb-document-part", "ledger.docx", docx_huge_document_part, Rejected(DOCX_BOMB)),
    # images
    Hostile("png-1x1", "dot.png", files.one_pixel_png, failed("empty_input", "chunking"), needs_ocr=True),
    Hostile(
        "png-declaring-20000x20000",
        "huge.png",
        lambda: files.png_declaring_size(20_000, 20_000),
        failed("unsupported_input"),
    ),
    Hostile("png-truncated", "cut.png", lambda: files.truncated(files.png(), 0.5), failed("corrupt_input")),
    Hostile(
        "jpeg-magic-then-junk",
        "junk.jpg",
        lambda: junk(8_000, seed=9, prefix=b"\xff\xd8\xff\xe0"),
        failed("corrupt_input"),
    ),
)
