"""Decide what an upload is from its content (magic bytes), never from its name or client MIME type.

The parsers (:mod:`documents.parsers`) declare how their kinds are recognised and this module asks
them, in this order: a ``filetype`` signature guess that a parser trusts; a signature a parser
claims (a zip: DOCX by its member list); else the content must decode as text (UTF-8, UTF-16 or
GB18030), and the text sniffers decide (HTML, Markdown or plain text). The original file name only
breaks ties (Markdown or plain text); it never makes a file acceptable.
"""

from __future__ import annotations

from dataclasses import dataclass

import filetype

from documents import parsers
from documents.parsers import Kind
from documents.parsers.content import decode_text

__all__ = ["Kind", "Sniffed", "sniff"]


@dataclass(frozen=True, slots=True)
class Sniffed:
    """What the content is; ``encoding`` is the codec that decodes it, for text kinds only."""

    kind: str
    encoding: str | None = None


def sniff(data: bytes, *, filename: str = "") -> Sniffed | None:
    """The kind of ``data``, or None when it is not a supported type.

    ``filename`` only decides between Markdown and plain text when the content does not.
    Raises :class:`documents.parsers.UploadCheckFailed` when a parser refuses the content outright
    (a zip whose directory is too large to inspect safely).
    """
    if not data:
        return None
    # filetype's matchers for other formats are loose (any text starting "BM" is a "BMP"), so only
    # its answers for the formats we accept are trusted; everything else must prove it is text.
    guess = filetype.guess(data[:_MAGIC_PREFIX_BYTES])
    kind = parsers.magic_kind(guess.mime) if guess is not None else None
    if kind is not None:
        return Sniffed(kind)
    claimants = [
        parser.sniff_binary
        for parser in parsers.registered()
        if parser.sniff_binary is not None and data.startswith(parser.signatures)
    ]
    if claimants:  # a container that no claimant recognises is nothing we read, not text
        kind = next((found for sniff_binary in claimants if (found := sniff_binary(data))), None)
        return Sniffed(kind) if kind is not None else None
    decoded = decode_text(data)
    if decoded is None:
        return None
    for sniff_text in parsers.text_sniffers():
        kind = sniff_text(decoded.text, filename)
        if kind is not None:
            return Sniffed(kind, decoded.encoding)
    return None


_MAGIC_PREFIX_BYTES = 8192
