"""Ordinary documents for the chaos and scale-out runs, each carrying a phrase no other one has.

The phrase is two made-up words and a number (``KOLAMI RUZETA 4821``), so that searching for it
finds its own document and shares no word with any other. Scanned documents carry their phrase
only in an image (OCR must read it); the others carry it in their text layer or markup.
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass

import docx
from fpdf import FPDF

from tests.documents import files

SYLLABLES = ("ka", "lo", "mi", "ru", "ze", "ta", "vo", "ni", "pe", "su", "go", "fa", "di", "bo", "le", "xu")
KINDS = ("scanned-pdf", "text-pdf", "docx", "html", "markdown", "text")


@dataclass(frozen=True)
class Generated:
    phrase: str
    filename: str
    data: bytes
    kind: str


class Phrases:
    """Unique phrases from a seeded random source."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def _word(self) -> str:
        while True:
            word = "".join(self.rng.choice(SYLLABLES) for _ in range(3)).upper()
            if word not in self.used:
                self.used.add(word)
                return word

    def next(self) -> str:
        return f"{self._word()} {self._word()} {self.rng.randrange(1000, 10000)}"


def _pdf() -> FPDF:
    pdf = FPDF()
    pdf.set_creation_date(files._FIXED_DATE)
    pdf.set_font("helvetica", size=14)
    return pdf


def scanned_pdf(phrase: str) -> bytes:
    """A text cover page, then the phrase on an image-only page (OCR needed)."""
    pdf = _pdf()
    pdf.add_page()
    pdf.multi_cell(0, 8, "Archive cover page. The scanned record follows.")
    pdf.add_page()
    pdf.image(files.text_image([phrase]), x=15, y=20, w=180)
    return bytes(pdf.output())


def scanned_pages_pdf(phrases: list[str]) -> bytes:
    """One image-only page per phrase: every page needs OCR."""
    pdf = _pdf()
    for phrase in phrases:
        pdf.add_page()
        pdf.image(files.text_image([phrase]), x=15, y=20, w=180)
    return bytes(pdf.output())


def text_pdf(phrase: str) -> bytes:
    pdf = _pdf()
    pdf.add_page()
    pdf.multi_cell(0, 8, f"Record {phrase}. Filed with the harbor office.")
    pdf.add_page()
    pdf.multi_cell(0, 8, "Second page: nothing else of note.")
    return bytes(pdf.output())


def docx_bytes(phrase: str) -> bytes:
    document = docx.Document()
    document.add_heading("Harbor record", level=1)
    document.add_paragraph(f"Record {phrase}. Filed with the harbor office.")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def build(kind: str, phrase: str, number: int) -> Generated:
    if kind == "scanned-pdf":
        return Generated(phrase, f"scan-{number}.pdf", scanned_pdf(phrase), kind)
    if kind == "text-pdf":
        return Generated(phrase, f"paper-{number}.pdf", text_pdf(phrase), kind)
    if kind == "docx":
        return Generated(phrase, f"memo-{number}.docx", docx_bytes(phrase), kind)
    if kind == "html":
        page = f"<!DOCTYPE html><html><body><h1>Harbor record</h1><p>Record {phrase}.</p></body></html>"
        return Generated(phrase, f"page-{number}.html", page.encode(), kind)
    if kind == "markdown":
        text = f"# Harbor record\n\nRecord **{phrase}**, filed with the [office](https://example.org).\n"
        return Generated(phrase, f"notes-{number}.md", text.encode(), kind)
    return Generated(
        phrase, f"plain-{number}.txt", f"Record {phrase}.\nFiled with the harbor office.\n".encode(), kind
    )


def corpus(count: int, phrases: Phrases, *, scanned_every: int = 4, first: int = 0) -> list[Generated]:
    """``count`` documents, one in ``scanned_every`` a scan, the others cycling through the kinds."""
    text_kinds = KINDS[1:]
    return [
        build("scanned-pdf" if i % scanned_every == 0 else text_kinds[i % len(text_kinds)], phrases.next(), i)
        for i in range(first, first + count)
    ]
