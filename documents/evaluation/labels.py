"""Reading labelled queries from JSON Lines, pure Python (no ORM).

One object per line (blank lines are skipped)::

    {"query": "how are apple trees pruned", "relevant": ["<document uuid>", 1234],
     "grades": [2, 1], "language": "en"}

(each object on one line in the file)

``relevant`` lists document ids (UUID strings) and chunk ids (integers); ``grades`` (optional)
gives each a grade in the same order (default 1; 0 marks an item as explicitly not relevant).
The first bad line stops the whole import with a message naming the line.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass

MAX_QUERY_CHARS = 2000
MAX_LINES = 10_000
MAX_RELEVANT = 100
MAX_GRADE = 10
KEYS = {"query", "relevant", "grades", "language"}
# Han, kana and hangul: enough to tell a CJK query from the rest for the per-language figures.
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_LANGUAGE = re.compile(r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$")


class LabelsInvalid(ValueError):
    """A bad line: ``line`` is 1-based, ``reason`` user-safe."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


@dataclass(frozen=True)
class ParsedQuery:
    text: str
    language: str
    labels: dict[str, int]  # "document:<uuid>" / "chunk:<id>" -> grade
    line: int


def document_key(document_id: object) -> str:
    return f"document:{document_id}"


def chunk_key(chunk_id: object) -> str:
    return f"chunk:{chunk_id}"


def language_of(text: str, stored: str = "") -> str:
    """The language a run groups a query under: the stored one, else ``cjk`` for text with
    Chinese, Japanese or Korean script and ``other`` for the rest."""
    return stored or ("cjk" if _CJK.search(text) else "other")


def parse_line(raw: str, line: int) -> ParsedQuery:
    try:
        item = json.loads(raw)
    except json.JSONDecodeError:
        raise LabelsInvalid(line, "not valid JSON") from None
    if not isinstance(item, dict):
        raise LabelsInvalid(line, "expected a JSON object")
    unknown = sorted(set(item) - KEYS)
    if unknown:
        raise LabelsInvalid(
            line, f"unknown field {unknown[0]!r} (allowed: query, relevant, grades, language)"
        )
    text = item.get("query")
    if not isinstance(text, str) or not text.strip():
        raise LabelsInvalid(line, "'query' must be a non-empty string")
    if len(text) > MAX_QUERY_CHARS:
        raise LabelsInvalid(line, f"'query' is longer than {MAX_QUERY_CHARS} characters")
    relevant = item.get("relevant")
    if not isinstance(relevant, list) or not relevant:
        raise LabelsInvalid(line, "'relevant' must be a non-empty list of document ids or chunk ids")
    if len(relevant) > MAX_RELEVANT:
        raise LabelsInvalid(line, f"'relevant' lists more than {MAX_RELEVANT} items")
    grades = item.get("grades")
    if grades is None:
        grades = [1] * len(relevant)
    if not isinstance(grades, list) or len(grades) != len(relevant):
        raise LabelsInvalid(line, "'grades' must be a list as long as 'relevant'")
    labels: dict[str, int] = {}
    for value, grade in zip(relevant, grades, strict=True):
        if isinstance(grade, bool) or not isinstance(grade, int) or not 0 <= grade <= MAX_GRADE:
            raise LabelsInvalid(line, f"a grade must be a whole number from 0 to {MAX_GRADE}")
        labels[_key(value, line)] = grade
    language = item.get("language", "")
    if language and (not isinstance(language, str) or not _LANGUAGE.match(language)):
        raise LabelsInvalid(line, "'language' must be a language code such as 'en' or 'zh'")
    return ParsedQuery(text.strip(), (language or "").lower(), labels, line)


def _key(value: object, line: int) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return chunk_key(value)
    if isinstance(value, str):
        try:
            return document_key(uuid.UUID(value))
        except ValueError:
            pass
    raise LabelsInvalid(line, f"{str(value)[:60]!r} is neither a document id (UUID) nor a chunk id (integer)")


def parse_jsonl(data: bytes) -> list[ParsedQuery]:
    """Every query of a JSON Lines upload, or ``LabelsInvalid`` for the first bad line."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise LabelsInvalid(1, "the file is not UTF-8 text") from None
    out: list[ParsedQuery] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        if len(out) >= MAX_LINES:
            raise LabelsInvalid(number, f"more than {MAX_LINES} queries in one import")
        out.append(parse_line(raw, number))
    if not out:
        raise LabelsInvalid(1, "the file holds no queries")
    return out
