"""Decide what an upload is from its content (magic bytes), never from its name or client MIME type.

Binary formats are recognised by their signatures (``filetype``), DOCX by its zip member list, and
text by decoding it (UTF-8, UTF-16 or GB18030) and then looking at its structure. The original file
name is used only to break a tie between Markdown and plain text; it never makes a file acceptable.
"""

from __future__ import annotations

import codecs
import enum
import io
import re
import struct
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

import filetype
from charset_normalizer import from_bytes


class Kind(enum.StrEnum):
    """The document types the platform accepts."""

    PDF = "pdf"
    DOCX = "docx"
    HTML = "html"
    MARKDOWN = "markdown"
    TEXT = "text"
    PNG = "png"
    JPEG = "jpeg"
    TIFF = "tiff"

    @property
    def content_type(self) -> str:
        """The canonical MIME type, whatever the client claimed."""
        return _CONTENT_TYPES[self]

    @property
    def is_image(self) -> bool:
        return self in IMAGE_KINDS


_CONTENT_TYPES = {
    Kind.PDF: "application/pdf",
    Kind.DOCX: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    Kind.HTML: "text/html",
    Kind.MARKDOWN: "text/markdown",
    Kind.TEXT: "text/plain",
    Kind.PNG: "image/png",
    Kind.JPEG: "image/jpeg",
    Kind.TIFF: "image/tiff",
}
TEXT_KINDS = frozenset({Kind.HTML, Kind.MARKDOWN, Kind.TEXT})
IMAGE_KINDS = frozenset({Kind.PNG, Kind.JPEG, Kind.TIFF})


@dataclass(frozen=True, slots=True)
class Sniffed:
    """What the content is; ``encoding`` is the codec that decodes it, for text kinds only."""

    kind: Kind
    encoding: str | None = None


@dataclass(frozen=True, slots=True)
class DecodedText:
    """Text and the codec that decoded it (a Python codec name such as "utf-8" or "gb18030")."""

    text: str
    encoding: str


def sniff(data: bytes, *, filename: str = "") -> Sniffed | None:
    """The kind of ``data``, or None when it is not a supported type.

    ``filename`` only decides between Markdown and plain text when the content does not.
    Raises :class:`ZipDirectoryTooLarge` for a zip whose directory is too large to inspect safely.
    """
    if not data:
        return None
    # filetype's matchers for other formats are loose (any text starting "BM" is a "BMP"), so only
    # its answers for the formats we accept are trusted; everything else must prove it is text.
    guess = filetype.guess(data[:_MAGIC_PREFIX_BYTES])
    if guess is not None and guess.mime in _MAGIC_KINDS:
        return Sniffed(_MAGIC_KINDS[guess.mime])
    if data.startswith(_ZIP_SIGNATURES):
        # filetype only recognises DOCX whose first entry is [Content_Types].xml; the member list
        # is the real test.
        return Sniffed(Kind.DOCX) if is_docx_archive(data) else None
    decoded = decode_text(data)
    if decoded is None:
        return None
    return Sniffed(text_kind(decoded.text, filename=filename), decoded.encoding)


_MAGIC_PREFIX_BYTES = 8192
_MAGIC_KINDS = {
    "application/pdf": Kind.PDF,
    "image/png": Kind.PNG,
    "image/jpeg": Kind.JPEG,
    "image/tiff": Kind.TIFF,
}
_ZIP_SIGNATURES = (b"PK\x03\x04", b"PK\x05\x06")


# --- zip archives ------------------------------------------------------------------------------

MAX_ZIP_ENTRIES = 5_000
# zipfile reads the central directory by its declared size (not its entry count) and builds an
# object per entry: 300,000 empty entries in a 26 MB upload cost 1.8 s and 170 MB here. Bounding
# the directory size bounds that work even when the entry count in the end record lies. 300 bytes
# per entry is generous for office files (46-byte header plus name and extra fields).
MAX_ZIP_DIRECTORY_BYTES = MAX_ZIP_ENTRIES * 300
DOCX_REQUIRED_MEMBERS = frozenset({"[Content_Types].xml", "word/document.xml"})

# End of central directory record: signature, disk numbers, entry counts, directory size and
# offset, comment length. A zip64 locator sits right before it when the archive uses zip64.
_END_RECORD = struct.Struct("<4s4H2LH")
_END_SIGNATURE = b"PK\x05\x06"
_ZIP64_LOCATOR_SIGNATURE = b"PK\x06\x07"
_ZIP64_LOCATOR_SIZE = 20


class ZipDirectoryTooLarge(ValueError):
    """The archive declares more entries (or a larger directory) than can be listed safely."""


def read_zip_directory(data: bytes) -> list[zipfile.ZipInfo] | None:
    """The members of the zip archive ``data``, or None when it is not a readable zip.

    Raises :class:`ZipDirectoryTooLarge` before listing anything when the end record declares
    more than :data:`MAX_ZIP_ENTRIES` entries, a directory over :data:`MAX_ZIP_DIRECTORY_BYTES`, or
    zip64 (which no archive under our size limits needs).
    """
    end = data.rfind(_END_SIGNATURE, max(0, len(data) - _END_RECORD.size - 0xFFFF))
    if end < 0 or end + _END_RECORD.size > len(data):
        return None
    _, _, _, _, entries, directory_size, _, _ = _END_RECORD.unpack_from(data, end)
    locator = end - _ZIP64_LOCATOR_SIZE
    zip64 = locator >= 0 and data[locator : locator + 4] == _ZIP64_LOCATOR_SIGNATURE
    if zip64 or entries > MAX_ZIP_ENTRIES or directory_size > MAX_ZIP_DIRECTORY_BYTES:
        raise ZipDirectoryTooLarge(
            f"zip end record declares {entries} entries, {directory_size} directory bytes, zip64={zip64}"
        )
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return None
    if len(members) > MAX_ZIP_ENTRIES:
        raise ZipDirectoryTooLarge(f"zip directory lists {len(members)} entries")
    return members


def is_docx_archive(data: bytes) -> bool:
    """Whether the zip ``data`` has the members every DOCX has (its size limits are not checked)."""
    members = read_zip_directory(data)
    return members is not None and {member.filename for member in members} >= DOCX_REQUIRED_MEMBERS


# --- text --------------------------------------------------------------------------------------

_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# Unrestricted, charset-normalizer misread short GBK text as Big5 or Korean.
_DETECTABLE_ENCODINGS = ["utf_8", "gb18030", "utf_16"]
_SAMPLE_CHARS = 65_536
# C0 controls other than tab, newline, form feed and carriage return; DEL and C1 controls;
# private-use characters and non-characters. Real text has almost none; binary data that happens
# to decode (any bytes below 0x80 are valid UTF-8 and GB18030) is full of them.
_NOT_TEXT = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\ue000-\uf8ff\ufffe\uffff]")
_MAX_NOT_TEXT_RATIO = 0.01


def decode_text(data: bytes) -> DecodedText | None:
    """Decode ``data`` as UTF-8, UTF-16 or GB18030 text, or None when it is not text.

    A byte order mark decides; otherwise strict UTF-8 is tried first, then charset-normalizer
    restricted to those encodings. Decoded content full of control characters is binary.
    """
    for encoding in _candidate_encodings(data):
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        if _looks_like_text(text):
            return DecodedText(text, codecs.lookup(encoding).name)
    return None


def _candidate_encodings(data: bytes) -> Iterator[str]:
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            yield encoding
            return  # a byte order mark is a declaration: guessing past it would only mislead
    utf16 = _utf16_from_nul_pattern(data)
    if utf16 is not None:
        # Checked before UTF-8 because ASCII in UTF-16 is also valid (NUL-laden) UTF-8.
        yield utf16
    yield "utf-8"
    best = from_bytes(data, cp_isolation=_DETECTABLE_ENCODINGS).best()
    if best is not None and codecs.lookup(best.encoding).name != "utf-8":
        yield best.encoding


def _utf16_from_nul_pattern(data: bytes) -> str | None:
    """UTF-16 without a byte order mark, recognised by the NUL half of each ASCII character."""
    sample = data[:4096]
    if len(sample) < 4 or len(sample) % 2:
        return None
    pairs = len(sample) // 2
    even_nuls = sample[0::2].count(0)
    odd_nuls = sample[1::2].count(0)
    if odd_nuls > pairs * 0.3 and even_nuls == 0:
        return "utf-16-le"
    if even_nuls > pairs * 0.3 and odd_nuls == 0:
        return "utf-16-be"
    return None


def _looks_like_text(text: str) -> bool:
    if "\x00" in text:
        return False
    sample = text[:_SAMPLE_CHARS]
    return len(_NOT_TEXT.findall(sample)) <= len(sample) * _MAX_NOT_TEXT_RATIO


# --- HTML, Markdown or plain text ----------------------------------------------------------------

_HTML_DOCUMENT = re.compile(r"<(?:!doctype\s+html|html|head|body)\b", re.IGNORECASE)
_HTML_FRAGMENT_TAGS = (
    "p|div|span|table|ul|ol|h[1-6]|section|article|main|header|footer|nav|title|meta|a|form|pre|blockquote"
)
_HTML_FRAGMENT = re.compile(rf"<({_HTML_FRAGMENT_TAGS})\b[^>]*>", re.IGNORECASE)

_MARKDOWN_STRONG = (
    re.compile(r"^ {0,3}#{1,6}[ \t]+\S", re.MULTILINE),  # ATX heading
    re.compile(r"^ {0,3}(?:```|~~~)", re.MULTILINE),  # code fence
    # table rule under a header row: | --- | :---: |
    re.compile(r"^ {0,3}\|?[ \t]*:?-{3,}:?[ \t]*(?:\|[ \t]*:?-{3,}:?[ \t]*)+\|?[ \t]*$", re.MULTILINE),
    # inline link or image. Neither part may contain its own brackets, so each scan from a "[" or
    # "](" stops at the next one: linear. "[^\]]+" backtracked over a whole line from every "[",
    # and a 64 KB line of "[" held the upload request (and the GIL) for 8 s.
    re.compile(r"!?\[[^\[\]\n]+\]\([^()\s]+\)"),
)
_MARKDOWN_WEAK = (
    re.compile(r"^ {0,3}[-*+][ \t]+\S", re.MULTILINE),  # bullet item
    re.compile(r"^ {0,3}\d{1,9}[.)][ \t]+\S", re.MULTILINE),  # numbered item
    re.compile(r"^ {0,3}>", re.MULTILINE),  # block quote
    re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__"),  # strong emphasis
    re.compile(r"`[^`\n]+`"),  # inline code
)
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdown", ".mkd", ".mkdn"})


def text_kind(text: str, *, filename: str = "") -> Kind:
    """HTML, Markdown or plain text, by content; the name's extension only breaks a Markdown tie.

    A document that starts like an HTML page is HTML. Markdown needs two points of evidence (a
    heading, fence, table rule or link counts two; a list, quote, emphasis or inline code one).
    Text starting with an HTML element is an HTML fragment. Anything else is plain text, unless
    it is named like Markdown: unstructured Markdown parses exactly like plain text.
    """
    head = _skip_markup_preamble(text[:_SAMPLE_CHARS])
    if _HTML_DOCUMENT.match(head):
        return Kind.HTML
    if markdown_score(head) >= 2:
        return Kind.MARKDOWN
    fragment = _HTML_FRAGMENT.match(head)
    if fragment and re.search(rf"</{fragment.group(1)}\s*>", head, re.IGNORECASE):
        return Kind.HTML
    suffix = PurePosixPath(filename.replace("\\", "/")).suffix.lower()
    return Kind.MARKDOWN if suffix in MARKDOWN_SUFFIXES else Kind.TEXT


def markdown_score(text: str) -> int:
    """Evidence that ``text`` is Markdown: 2 per strong feature present, 1 per weak one."""
    strong = sum(1 for pattern in _MARKDOWN_STRONG if pattern.search(text))
    weak = sum(1 for pattern in _MARKDOWN_WEAK if pattern.search(text))
    return 2 * strong + weak


def _skip_markup_preamble(text: str) -> str:
    """Drop leading whitespace, an XML declaration and comments, which may precede <html>."""
    text = text.lstrip()
    if text.startswith("<?xml"):
        text = text.partition("?>")[2].lstrip()
    while text.startswith("<!--"):
        text = text.partition("-->")[2].lstrip()
    return text
