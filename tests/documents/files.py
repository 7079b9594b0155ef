"""Real documents built at test time, so no binary fixture is committed.

Every generator is deterministic and fast (well under a second). Scanned pages carry large, clean
rendered text so that OCR tests can read them later.
"""

from __future__ import annotations

import functools
import io
import re
import struct
import zipfile
import zlib
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import docx
from docx.document import Document as DocxDocument
from fpdf import FPDF
from PIL import Image, ImageDraw, ImageFont

LATIN_FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
CJK_FONT = Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc")  # Debian fonts-wqy-microhei

PAGE_PHRASES = (
    "Amber falcon crosses the northern ridge.",
    "Cobalt harbor wakes before the fishing boats.",
    "Velvet orchard hums through the spring night.",
)
SCANNED_PHRASE = "SCANNED INVOICE 4711"
CHINESE_PAGE_PHRASES = ("第一页。春天的果园很安静。", "第二页。港口的渔船已经出发。")
CHINESE_SCANNED_PHRASE = "扫描文件测试"
_FIXED_DATE = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)


def save(directory: Path, name: str, data: bytes) -> Path:
    path = directory / name
    path.write_bytes(data)
    return path


# --- PDF ---------------------------------------------------------------------------------------


def _new_pdf() -> FPDF:
    pdf = FPDF()
    pdf.set_creation_date(_FIXED_DATE)  # the default (now) would make the bytes differ per run
    return pdf


def text_pdf(pages: Sequence[str] = PAGE_PHRASES, *, title: str | None = None) -> bytes:
    """A PDF with a text layer, one page per string (Latin-1 text, core font)."""
    pdf = _new_pdf()
    if title:
        pdf.set_title(title)
    for text in pages:
        pdf.add_page()
        pdf.set_font("helvetica", size=14)
        pdf.multi_cell(0, 8, text)
    return bytes(pdf.output())


def chinese_text_pdf(pages: Sequence[str] = CHINESE_PAGE_PHRASES) -> bytes:
    """A PDF with a Chinese text layer, in an embedded CJK font."""
    pdf = _new_pdf()
    pdf.add_font("wqy", fname=str(CJK_FONT))
    for text in pages:
        pdf.add_page()
        pdf.set_font("wqy", size=16)
        pdf.multi_cell(0, 10, text)
    return bytes(pdf.output())


def scanned_pdf(scanned_text: str = SCANNED_PHRASE, *, font: Path = LATIN_FONT) -> bytes:
    """Three pages: text, a "scanned" page (an image only, no text layer), text.

    The text pages carry PAGE_PHRASES[0] and PAGE_PHRASES[2].
    """
    pdf = _new_pdf()
    pdf.set_font("helvetica", size=14)
    pdf.add_page()
    pdf.multi_cell(0, 8, PAGE_PHRASES[0])
    pdf.add_page()
    pdf.image(text_image([scanned_text], font=font), x=15, y=20, w=180)
    pdf.add_page()
    pdf.multi_cell(0, 8, PAGE_PHRASES[2])
    return bytes(pdf.output())


def chinese_scanned_pdf() -> bytes:
    """A single image-only page showing Chinese text."""
    pdf = _new_pdf()
    pdf.add_page()
    # About 28 pt glyphs: tesseract misread these characters when they filled the page width.
    pdf.image(text_image([CHINESE_SCANNED_PHRASE], font=CJK_FONT), x=15, y=20, w=60)
    return bytes(pdf.output())


def encrypted_pdf(user_password: str = "secret") -> bytes:
    """A PDF that cannot be opened without ``user_password``."""
    pdf = _new_pdf()
    pdf.set_encryption(owner_password="owner-pass", user_password=user_password)
    pdf.add_page()
    pdf.set_font("helvetica", size=14)
    pdf.multi_cell(0, 8, "Confidential numbers inside.")
    return bytes(pdf.output())


def owner_password_pdf() -> bytes:
    """A PDF with only an owner password (permissions): anyone may open and read it."""
    pdf = _new_pdf()
    pdf.set_encryption(owner_password="owner-pass")
    pdf.add_page()
    pdf.set_font("helvetica", size=14)
    pdf.multi_cell(0, 8, PAGE_PHRASES[0])
    return bytes(pdf.output())


def zero_page_pdf() -> bytes:
    """A well-formed PDF whose page tree is empty (fpdf2 refuses to write one, so it is assembled)."""
    return assemble_pdf([b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [] /Count 0 >>"])


def assemble_pdf(objects: Sequence[bytes], trailer: bytes = b"") -> bytes:
    """A PDF of numbered objects (the first is the catalog) with a correct cross-reference table;
    ``trailer`` adds entries to the trailer dictionary (e.g. ``/Encrypt``)."""
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        trailer,
        xref,
    )
    return bytes(out)


def damage_pdf_object(data: bytes, number: int) -> bytes:
    """``data`` with object ``number``'s dictionary overwritten, keeping every offset valid."""
    match = re.search(rb"\n%d 0 obj\n(<<.*?>>)\nendobj" % number, data, re.DOTALL)
    assert match is not None, f"object {number} not found"
    start, end = match.span(1)
    return data[:start] + b"X" * (end - start) + data[end:]


def page_object_numbers(data: bytes) -> list[int]:
    """Object numbers of the page dictionaries of an fpdf2 PDF, in page order."""
    kids = re.search(rb"/Kids \[([^\]]*)\]", data)
    assert kids is not None
    return [int(number) for number in re.findall(rb"(\d+) 0 R", kids.group(1))]


def truncated(data: bytes, fraction: float = 0.5) -> bytes:
    return data[: int(len(data) * fraction)]


def bit_flipped(data: bytes, *, every: int = 7) -> bytes:
    """Every ``every``-th byte inverted: the damage a bad disk or transfer leaves everywhere."""
    damaged = bytearray(data)
    for index in range(0, len(damaged), every):
        damaged[index] ^= 0xFF
    return bytes(damaged)


# --- images ------------------------------------------------------------------------------------


def text_image(lines: Sequence[str], *, font: Path = LATIN_FONT, size: int = 72) -> Image.Image:
    """Black text on white in grayscale, large and clean enough for OCR."""
    face = ImageFont.truetype(str(font), size)
    margin, line_height = size, int(size * 1.5)
    width = max(int(face.getlength(line)) for line in lines) + 2 * margin
    image = Image.new("L", (width, line_height * len(lines) + 2 * margin), color=255)
    draw = ImageDraw.Draw(image)
    for index, line in enumerate(lines):
        draw.text((margin, margin + index * line_height), line, font=face, fill=0)
    return image


def image_bytes(image: Image.Image, image_format: str) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=image_format)
    return buffer.getvalue()


def png(lines: Sequence[str] = (SCANNED_PHRASE,)) -> bytes:
    return image_bytes(text_image(lines), "PNG")


def jpeg(lines: Sequence[str] = (SCANNED_PHRASE,)) -> bytes:
    return image_bytes(text_image(lines).convert("RGB"), "JPEG")


def multipage_tiff(pages: Sequence[str] = PAGE_PHRASES[:2]) -> bytes:
    """A TIFF with one frame per string."""
    frames = [text_image([text], size=48) for text in pages]
    buffer = io.BytesIO()
    frames[0].save(buffer, format="TIFF", save_all=True, append_images=frames[1:], compression="tiff_deflate")
    return buffer.getvalue()


def one_pixel_png() -> bytes:
    return image_bytes(Image.new("RGB", (1, 1), color=(255, 255, 255)), "PNG")


def png_declaring_size(width: int, height: int) -> bytes:
    """A PNG whose header declares ``width`` x ``height`` (with valid CRC) but whose data is 1x1:
    the shape of a decompression bomb, without building one."""
    data = bytearray(one_pixel_png())
    # Signature (8 bytes), then the IHDR chunk: length (4), type (4), width (4), height (4), ...
    struct.pack_into(">II", data, 16, width, height)
    ihdr_type_and_body = bytes(data[12:29])
    struct.pack_into(">I", data, 29, zlib.crc32(ihdr_type_and_body))
    return bytes(data)


# --- DOCX --------------------------------------------------------------------------------------

DOCX_TABLE = (("Region", "Revenue", "Growth"), ("North", "120", "5%"), ("South", "98", "-2%"))


def docx_document() -> bytes:
    """A DOCX with a title, headings, paragraphs, list items, a Chinese paragraph and a table."""
    document = docx.Document()
    document.core_properties.title = "Quarterly Report"
    document.add_heading("Quarterly Report", level=0)
    document.add_heading("Summary", level=1)
    document.add_paragraph("Revenue grew in the north and fell slightly in the south.")
    document.add_paragraph("First finding", style="List Bullet")
    document.add_paragraph("Nested finding", style="List Bullet 2")
    document.add_heading("Details", level=2)
    document.add_paragraph("收入在北方增长。")
    table = document.add_table(rows=len(DOCX_TABLE), cols=len(DOCX_TABLE[0]))
    for row, values in zip(table.rows, DOCX_TABLE, strict=True):
        for cell, value in zip(row.cells, values, strict=True):
            cell.text = value
    document.add_paragraph("Closing remarks after the table.")
    return _docx_bytes(document)


def docx_with_merged_cells() -> bytes:
    """A table whose first row is one cell spanning two columns, plus a cell holding a nested table."""
    document = docx.Document()
    table = document.add_table(rows=2, cols=2)
    merged = table.cell(0, 0).merge(table.cell(0, 1))
    merged.text = "Spanning header"
    table.cell(1, 0).text = "Left"
    nested = table.cell(1, 1).add_table(rows=1, cols=2)
    nested.cell(0, 0).text = "inner A"
    nested.cell(0, 1).text = "inner B"
    return _docx_bytes(document)


def empty_docx() -> bytes:
    """A valid DOCX with only blank paragraphs and an empty table."""
    document = docx.Document()
    document.add_paragraph("   ")
    document.add_table(rows=2, cols=2)
    return _docx_bytes(document)


def _docx_bytes(document: DocxDocument) -> bytes:
    # python-docx stamps the current time into the core properties and the zip entries.
    document.core_properties.created = document.core_properties.modified = _FIXED_DATE
    buffer = io.BytesIO()
    document.save(buffer)
    return _rezip(buffer.getvalue())


def docx_reordered(data: bytes | None = None) -> bytes:
    """The same DOCX with its zip entries reordered: custom XML parts first, [Content_Types].xml
    last. Word accepts any order; filetype only looks at the first few entries and sees a zip."""

    def order(names: list[str]) -> list[str]:
        return sorted(
            names, key=lambda name: (not name.startswith("customXml/"), name == "[Content_Types].xml")
        )

    return _rezip(data or docx_document(), order=order)


def docx_with_broken_xml() -> bytes:
    """A DOCX whose main document part is cut off mid-element."""
    return _rezip(
        docx_document(), replace={"word/document.xml": b'<?xml version="1.0"?><w:document xmlns:w="'}
    )


def _rezip(
    data: bytes,
    *,
    order: Callable[[list[str]], list[str]] | None = None,
    replace: dict[str, bytes] | None = None,
) -> bytes:
    """``data`` rewritten with fixed timestamps, members optionally reordered or replaced."""
    replace = replace or {}
    with zipfile.ZipFile(io.BytesIO(data)) as source:
        names = source.namelist()
        contents = {name: replace.get(name, source.read(name)) for name in names}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as target:
        for name in order(names) if order else names:
            target.writestr(_fixed_info(name), contents[name])
    return buffer.getvalue()


_MINIMAL_CONTENT_TYPES = (
    b'<?xml version="1.0" encoding="UTF-8"?>'
    b'<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    b'<Default Extension="xml" ContentType="application/xml"/></Types>'
)
_MINIMAL_DOCUMENT = (
    b'<?xml version="1.0" encoding="UTF-8"?>'
    b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
    b"<w:body><w:p><w:r><w:t>bomb</w:t></w:r></w:p></w:body></w:document>"
)


def _fixed_info(name: str, compress_type: int = zipfile.ZIP_DEFLATED) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=(2024, 1, 2, 3, 4, 6))
    info.compress_type = compress_type
    return info


def _docx_skeleton(archive: zipfile.ZipFile) -> None:
    archive.writestr(_fixed_info("[Content_Types].xml"), _MINIMAL_CONTENT_TYPES)
    archive.writestr(_fixed_info("word/document.xml"), _MINIMAL_DOCUMENT)


@functools.cache  # several tests share it; bytes are immutable
def docx_bomb(member_mb: int = 200) -> bytes:
    """A DOCX-shaped zip with a ``member_mb`` MB member of zeros (under 1 MB compressed).

    Streamed through zipfile, so the expanded member is never held in memory; builds in about
    half a second.
    """
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        _docx_skeleton(archive)
        megabyte = bytes(1024 * 1024)
        with archive.open(_fixed_info("word/media/zeros.bin"), "w") as member:
            for _ in range(member_mb):
                member.write(megabyte)
    return buffer.getvalue()


def docx_many_entries(count: int = 5_001) -> bytes:
    """A DOCX-shaped zip with ``count`` entries in all (the two required parts plus empty files)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        _docx_skeleton(archive)
        for index in range(count - 2):
            archive.writestr(_fixed_info(f"word/media/p{index}.bin", zipfile.ZIP_STORED), b"")
    return buffer.getvalue()


# Zip headers: signature, offset of the flags, of the name length, and of the name.
_ZIP_HEADERS = ((b"PK\x03\x04", 6, 26, 30), (b"PK\x01\x02", 8, 28, 46))


def docx_with_encrypted_member(name: str = "word/document.xml") -> bytes:
    """A DOCX whose member ``name`` is flagged as encrypted in its local and central headers.

    zipfile cannot write encrypted members, so the flag bit is set in the bytes afterwards.
    """
    data = bytearray(docx_document())
    for signature, flags_at, length_at, name_at in _ZIP_HEADERS:
        position = data.find(signature)
        while position >= 0:
            (length,) = struct.unpack_from("<H", data, position + length_at)
            if data[position + name_at : position + name_at + length] == name.encode():
                (flags,) = struct.unpack_from("<H", data, position + flags_at)
                struct.pack_into("<H", data, position + flags_at, flags | 0x1)
            position = data.find(signature, position + 4)
    return bytes(data)


def zip_of_other_files() -> bytes:
    """A plain zip (notes and a picture): what a renamed archive looks like."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(_fixed_info("notes.txt"), "Shopping list: apples, pears.")
        archive.writestr(_fixed_info("photo.png"), one_pixel_png())
    return buffer.getvalue()


# --- HTML, Markdown and text ---------------------------------------------------------------------

HTML_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Harbor   Report</title>
  <style>body { color: red; } .secret { display: none }</style>
  <script>var tracking = "SCRIPT_MARKER";</script>
</head>
<body>
  <noscript>NOSCRIPT_MARKER enable javascript</noscript>
  <template><p>TEMPLATE_MARKER</p></template>
  <h1>Harbor <em>Report</em></h1>
  <p>The boats left   at dawn.<br>They returned at dusk.</p>
  <div>Loose text in a div <a href="/x">with a link</a></div>
  <h2>Catch</h2>
  <ul>
    <li>Cod<ul><li>Atlantic cod</li></ul></li>
    <li>Herring</li>
  </ul>
  <table>
    <tr><th>Fish</th><th>Tons</th></tr>
    <tr><td>Cod</td><td>12</td></tr>
  </table>
  <pre>  line one
  line two</pre>
  <script>document.write("SCRIPT_MARKER")</script>
  <p>港口的渔船已经出发。</p>
</body>
</html>
"""

MARKDOWN_DOC = """---
title: Field notes
---
# Field Notes

The survey started on **Monday** with a [map](https://example.org/map).
It continued for a week.

## Findings

- Birds nested early
  - Mostly swallows
- Water levels rose

1. First measure
2. Second measure

| Site | Count |
|------|------:|
| A    | 12    |
| B    | 7     |

```python
print("code stays as written")
```

> Quoted remark from the guide.

Setext Heading
--------------

最后一段是中文。
"""

ENGLISH_TEXT = (
    "Plain notes from the harbor.\nThe tide was high.\n\n"
    "Second paragraph, after a blank line.\n\n\n   \nThird paragraph."
)
CHINESE_TEXT = "港口笔记。\n潮水很高。\n\n第二段。渔船在黎明出发。黄昏返回。"
