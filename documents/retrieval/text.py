"""The text both sides of lexical search see: words as they are, CJK runs as character n-grams.

Chinese, Japanese and Korean are written without spaces, so a word tokenizer would make a whole
sentence one token and a query of two characters would match nothing. Both the indexed text and
the query expand such runs to overlapping character bigrams (plus single characters, so a
one-character query matches too); the full-text engines then see plain space-separated tokens
(FTS5's ``unicode61`` tokenizer, PostgreSQL's ``simple`` configuration).

Pure functions: no ORM, no engine.
"""

from __future__ import annotations

import re
import unicodedata

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f"
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+")
_CJK_RUN = re.compile(rf"[{_CJK}]+")
# What _TOKEN finds in ASCII text (NFKC leaves ASCII as it is): a third of the time per chunk.
_ASCII_WORD = re.compile(r"[a-z0-9]+")

# A query of hundreds of words is a pasted paragraph: its first terms say enough, and an OR of
# thousands of terms would make every row a candidate.
MAX_QUERY_TERMS = 64


def _normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


def _cjk_grams(run: str, *, unigrams: bool) -> list[str]:
    bigrams = [run[i : i + 2] for i in range(len(run) - 1)]
    if len(run) == 1:
        return [run]
    return [*run, *bigrams] if unigrams else bigrams


def search_text(text: str) -> str:
    """What the full-text index stores for ``text``: lowercased words, CJK runs as their
    characters and character bigrams, all space-separated."""
    if text.isascii():
        return " ".join(_ASCII_WORD.findall(text.lower()))
    return _search_text_any(text)


def _search_text_any(text: str) -> str:
    """:func:`search_text` for any text (the ASCII shortcut must give the same)."""
    out: list[str] = []
    for token in _TOKEN.findall(_normalise(text)):
        if _CJK_RUN.fullmatch(token):
            out.extend(_cjk_grams(token, unigrams=True))
        else:
            out.append(token)
    return " ".join(out)


def query_tokens(query: str) -> list[str]:
    """The distinct terms of ``query`` to look up, in order: words, and the bigrams of each CJK
    run (a single CJK character stays one term). Bigrams alone keep a Chinese query precise: its
    unigrams would match nearly every Chinese chunk."""
    seen: dict[str, None] = {}
    for token in _TOKEN.findall(_normalise(query)):
        grams = _cjk_grams(token, unigrams=False) if _CJK_RUN.fullmatch(token) else [token]
        for gram in grams:
            seen.setdefault(gram, None)
    return list(seen)[:MAX_QUERY_TERMS]


def fts5_query(tokens: list[str]) -> str:
    """An FTS5 MATCH expression: any of the tokens, each quoted (so no token is an operator)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in tokens)


def tsquery(tokens: list[str]) -> str:
    """A PostgreSQL ``to_tsquery('simple', ...)`` text: any of the tokens, each quoted."""
    return " | ".join("'" + t.replace("\\", "\\\\").replace("'", "''") + "'" for t in tokens)
