"""Worst-case inputs for a regular expression, generated from its parsed form.

Backtracking blows up where a repeat can give characters to a neighbour (``[ \\t]*`` next to
``[ \\t]*``), where a repeat holds another repeat (``(a+)+``), or where a search restarts a long
scan from every position (``<p[^>]*>`` over ``<p <p <p ...``). For every repeat in a pattern this
builds the shortest text that reaches it, pumps each character the repeat takes (and the shortest
text of its body) many times, and ends with a character that makes the match fail; it also
repeats "reach it, then one pumped character" many times. A pattern that stays fast on all of them
has no super-linear case of those shapes.
"""

from __future__ import annotations

import re
import re._constants as c  # the parser's node names: part of CPython since 3.11
import re._parser as sre
from collections.abc import Iterator
from typing import Any

# Characters tried for each repeated class, one of each kind the classes tell apart; the
# pattern's own literals (the characters that interact with its other parts) are added per pattern.
_PROBES = "a0_ \t\n\x00\u3000中"
_SUFFIXES = ("", "\x00", "x", "\n")
_CATEGORY = {
    c.CATEGORY_DIGIT: str.isdigit,
    c.CATEGORY_NOT_DIGIT: lambda ch: not ch.isdigit(),
    c.CATEGORY_SPACE: str.isspace,
    c.CATEGORY_NOT_SPACE: lambda ch: not ch.isspace(),
    c.CATEGORY_WORD: lambda ch: ch.isalnum() or ch == "_",
    c.CATEGORY_NOT_WORD: lambda ch: not (ch.isalnum() or ch == "_"),
    c.CATEGORY_LINEBREAK: lambda ch: ch == "\n",
    c.CATEGORY_NOT_LINEBREAK: lambda ch: ch != "\n",
}
_REPEATS = (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT)


def _in_class(items: list[Any], ch: str) -> bool:
    negate = False
    hit = False
    for op, av in items:
        if op is c.NEGATE:
            negate = True
        elif op is c.LITERAL:
            hit = hit or ord(ch) == av
        elif op is c.RANGE:
            hit = hit or av[0] <= ord(ch) <= av[1]
        elif op is c.CATEGORY:
            hit = hit or _CATEGORY[av](ch)
    return hit != negate


def _first_chars(seq: Any, alphabet: str) -> set[str]:
    """Characters that can start a match of ``seq`` (over-approximated: extra probes cost nothing)."""
    chars: set[str] = set()
    for op, av in seq:
        if op is c.AT or op in (c.ASSERT, c.ASSERT_NOT):
            continue
        if op is c.LITERAL:
            chars.add(chr(av))
        elif op is c.NOT_LITERAL:
            chars.update(ch for ch in alphabet if ord(ch) != av)
        elif op is c.ANY:
            chars.update(ch for ch in alphabet if ch != "\n")
        elif op is c.IN:
            chars.update(ch for ch in alphabet if _in_class(av, ch))
        elif op in _REPEATS:
            chars |= _first_chars(av[2], alphabet)
            if av[0] == 0:
                continue  # may be skipped: what follows can start the match too
        elif op is c.SUBPATTERN:
            chars |= _first_chars(av[3], alphabet)
        elif op is c.ATOMIC_GROUP:
            chars |= _first_chars(av, alphabet)
        elif op is c.BRANCH:
            for alternative in av[1]:
                chars |= _first_chars(alternative, alphabet)
        return chars
    return chars


def _example(seq: Any, alphabet: str) -> str:
    """A short text matching ``seq``: the way to reach what follows it."""
    out = []
    for op, av in seq:
        if op is c.LITERAL:
            out.append(chr(av))
        elif op in (c.NOT_LITERAL, c.ANY, c.IN):
            out.append(min(_first_chars([(op, av)], alphabet), key=alphabet.index, default="a"))
        elif op in _REPEATS:
            out.append(_example(av[2], alphabet) * av[0])
        elif op is c.SUBPATTERN:
            out.append(_example(av[3], alphabet))
        elif op is c.ATOMIC_GROUP:
            out.append(_example(av, alphabet))
        elif op is c.BRANCH:
            out.append(_example(av[1][0], alphabet))
    return "".join(out)


def _literals(seq: Any) -> set[str]:
    found: set[str] = set()
    for op, av in seq:
        if op is c.LITERAL:
            found.add(chr(av))
        elif op is c.IN:
            found.update(chr(v) for o, v in av if o is c.LITERAL)
        elif op in _REPEATS:
            found |= _literals(av[2])
        elif op is c.SUBPATTERN:
            found |= _literals(av[3])
        elif op is c.ATOMIC_GROUP:
            found |= _literals(av)
        elif op is c.BRANCH:
            for alternative in av[1]:
                found |= _literals(alternative)
    return found


def _pumps(seq: Any, before: str, alphabet: str) -> Iterator[tuple[str, str]]:
    """(text reaching a repeat, one unit to pump) for every repeat inside ``seq``."""
    for index, (op, av) in enumerate(seq):
        reach = before + _example(seq[:index], alphabet)
        if op in _REPEATS:
            body = av[2]
            if av[1] > 1:
                for ch in sorted(_first_chars(body, alphabet)):
                    yield reach, ch
                unit = _example(body, alphabet)
                if len(unit) > 1:
                    yield reach, unit
            yield from _pumps(body, reach, alphabet)
        elif op is c.SUBPATTERN:
            yield from _pumps(av[3], reach, alphabet)
        elif op is c.ATOMIC_GROUP:
            yield from _pumps(av, reach, alphabet)
        elif op is c.BRANCH:
            for alternative in av[1]:
                yield from _pumps(alternative, reach, alphabet)


def attacks(pattern: re.Pattern[str], length: int) -> Iterator[str]:
    """Hostile texts of about ``length`` characters for ``pattern``."""
    parsed = sre.parse(pattern.pattern, pattern.flags)
    literals = "".join(sorted(_literals(parsed.data)))
    alphabet = _PROBES + "".join(ch for ch in literals if ch not in _PROBES)
    if pattern.flags & re.IGNORECASE:
        alphabet += "".join(
            ch.upper() for ch in alphabet if ch.upper() not in alphabet and len(ch.upper()) == 1
        )
    seen: set[str] = set()
    for reach, unit in _pumps(parsed.data, "", alphabet):
        for suffix in _SUFFIXES:
            for text in (
                reach + unit * (length // len(unit)) + suffix,
                (reach + unit) * (length // (len(reach) + len(unit))) + suffix,
            ):
                if text not in seen:
                    seen.add(text)
                    yield text
