"""The text both sides of lexical search see: words as they are, CJK runs as character n-grams.

Chinese, Japanese and Korean are written without spaces, so a word tokenizer would make a whole
sentence one token and a query of two characters would match nothing. Both the indexed text and
the query expand such runs to overlapping character bigrams (plus single characters, so a
one-character query matches too); the full-text engines then see plain space-separated tokens
(FTS5's ``unicode61`` tokenizer, PostgreSQL's ``simple`` configuration).

Stop words ("the", "at", "who") are in the index but not asked for: a query's stop words
neither select nor rank a hit on their own, and are not highlighted, unless the query has
nothing else ("The Who" stays "the" and "who"). The list is PostgreSQL's (and Snowball's)
English one, ``english.stop``; applying it here serves FTS5 and PostgreSQL alike.

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


# PostgreSQL's tsearch_data/english.stop, the Snowball project's English stop words, verbatim.
_STOP_LIST = (
    "i me my myself we our ours ourselves you your yours yourself yourselves he him his himself "
    "she her hers herself it its itself they them their theirs themselves what which who whom "
    "this that these those am is are was were be been being have has had having do does did doing "
    "a an the and but if or because as until while of at by for with about against between into "
    "through during before after above below to from up down in out on off over under again "
    "further then once here there when where why how all any both each few more most other some "
    "such no nor not only own same so than too very s t can will just don should now"
)
STOP_WORDS = frozenset(_STOP_LIST.split())


def without_stop_words(terms: list[str]) -> list[str]:
    """``terms`` without the stop words, unless nothing else is left."""
    return [t for t in terms if t not in STOP_WORDS] or terms


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
    """The distinct terms of ``query`` to look up, in order: words (not the stop words, unless
    the query is nothing else), and the bigrams of each CJK run (a single CJK character stays one
    term). Bigrams alone keep a Chinese query precise: its unigrams would match nearly every
    Chinese chunk."""
    seen: dict[str, None] = {}
    for token in _TOKEN.findall(_normalise(query)):
        grams = _cjk_grams(token, unigrams=False) if _CJK_RUN.fullmatch(token) else [token]
        for gram in grams:
            seen.setdefault(gram, None)
    return without_stop_words(list(seen))[:MAX_QUERY_TERMS]


# A highlighted word starts and ends where the full text's words do: at no letter or digit of
# a non-CJK script on either side ("at" is no mark inside "platform"). So the text's words are
# found whole, and each compared with the query's: a pattern of the query's words between such
# bounds took 8 ms to compile, for every new query (Python folds the case of every character of
# the bounds' Unicode ranges), several times what marking a page of hits takes.
_WORD = re.compile(rf"[^\W_{_CJK}]+")


def highlight_terms(query: str) -> list[str]:
    """What a hit's text shows marked for ``query``: its words (not the stop words, unless the
    query is nothing else; no one-letter Latin word) and the character bigrams of its CJK runs
    (single CJK characters alone), longest first."""
    words: list[str] = []
    grams: set[str] = set()
    for token in _TOKEN.findall(_normalise(query)):
        if _CJK_RUN.fullmatch(token):
            grams.update(_cjk_grams(token, unigrams=False))
        elif len(token) > 1 or not token.isascii():
            words.append(token)
    terms = set(without_stop_words(words)) | grams
    return sorted(terms, key=lambda t: (-len(t), t))


def highlight_spans(text: str, query: str) -> list[tuple[int, int]]:
    """``(start, end)`` of what to mark in ``text`` for ``query``, in order, not overlapping:
    whole words that are query terms, and whole runs of CJK text covered by the query's
    character bigrams (a matched run is marked as one, not bigram by bigram)."""
    terms = highlight_terms(query)
    words = [t for t in terms if not _CJK_RUN.fullmatch(t)]
    grams = [t for t in terms if _CJK_RUN.fullmatch(t)]
    spans: list[tuple[int, int]] = []
    if words:
        wanted = set(words)
        spans.extend(m.span() for m in _WORD.finditer(text) if m.group().lower() in wanted)
    if grams:
        # Overlapping finds: every place each bigram occurs, then joined into runs.
        pattern = re.compile("(?=(" + "|".join(re.escape(g) for g in grams) + "))")
        spans.extend((m.start(), m.start() + len(m.group(1))) for m in pattern.finditer(text))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1] and _CJK_RUN.fullmatch(text[start:end]):
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        elif not merged or start >= merged[-1][1]:
            merged.append((start, end))
    return merged


def tsquery(tokens: list[str]) -> str:
    """A PostgreSQL ``to_tsquery('simple', ...)`` text: any of the tokens, each quoted."""
    return " | ".join("'" + t.replace("\\", "\\\\").replace("'", "''") + "'" for t in tokens)
