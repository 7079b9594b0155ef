"""Pattern-based reading (type sniffing, Markdown inline markup) stays linear on hostile lines.

Beyond the named cases below, every regular expression the ``documents`` app compiles (the
request path's sniffing and validation, the parsers, the sandbox, filters, chunking) is run
against worst cases generated from its own shape (``regex_attacks``), so a new backtracking
pattern fails here before it reaches an upload.

A 64 KB line of ``[`` took 8.4 s in the upload request and a 2 MB one froze both workers for
minutes: the link pattern backtracked over the whole line from every
``[``. Each input below took seconds (quadratic) before the patterns were rewritten; now they take
milliseconds. The bound is a liveness margin (a frozen parser takes many seconds), not a speed.
"""

from __future__ import annotations

import ast
import functools
import importlib
import pkgutil
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

import documents
from documents.engines.parsing import parse
from documents.engines.sniff import Kind, sniff
from tests.documents import files
from tests.documents.regex_attacks import attacks

LINE = 64 * 1024
LIVENESS_SECONDS = 2.0

HOSTILE_LINES = [
    pytest.param("[" * LINE, id="open-brackets"),
    pytest.param("![" * (LINE // 2), id="image-openers"),
    pytest.param("[x](" * (LINE // 4), id="unclosed-link-targets"),
    pytest.param("[" + "a" * LINE + "](", id="long-label-no-target"),
    pytest.param("[a](" + "b" * LINE, id="long-target-no-close"),
    pytest.param("**" + "a*" * (LINE // 2), id="emphasis-runs"),
    # a table rule then a long run of blanks: 33 s in the upload request
    pytest.param("| a | b |\n---|---" + " " * LINE + "x", id="table-rule-trailing-blanks"),
    pytest.param("---|---" + "\t" * LINE + "x", id="table-rule-trailing-tabs"),
]


@pytest.mark.parametrize("line", HOSTILE_LINES)
def test_sniffing_a_hostile_line_answers_at_once(line: str) -> None:
    data = ("Harbor notes\n\n" + line + "\n").encode()
    started = time.monotonic()
    sniffed = sniff(data, filename="notes.md")
    elapsed = time.monotonic() - started
    assert sniffed is not None
    assert elapsed < LIVENESS_SECONDS, f"sniffing took {elapsed:.1f}s"


@pytest.mark.parametrize("line", HOSTILE_LINES)
def test_markdown_parsing_a_hostile_line_answers_at_once(tmp_path: Path, line: str) -> None:
    path = files.save(tmp_path, "upload", ("# Harbor\n\n" + line + "\n").encode())
    started = time.monotonic()
    (page,) = parse(path, Kind.MARKDOWN)
    elapsed = time.monotonic() - started
    assert page.blocks[0].text == "Harbor"
    assert elapsed < LIVENESS_SECONDS, f"parsing took {elapsed:.1f}s"


def test_links_still_read_as_their_label(tmp_path: Path) -> None:
    text = "See [the harbor map](https://example.org/map) and ![a gull](gull.png) today.\n"
    (page,) = parse(files.save(tmp_path, "upload", text.encode()), Kind.MARKDOWN)
    assert page.blocks[0].text == "See the harbor map and a gull today."
    sniffed = sniff(("# Title\n\n" + text).encode())
    assert sniffed is not None and sniffed.kind is Kind.MARKDOWN


# --- every pattern, against worst cases built from its own shape ---------------------------------

ATTACK_LENGTH = 32 * 1024
PATTERN_SECONDS = 1.0  # per hostile text: a linear scan of 32 KB takes milliseconds
DOCUMENTS = Path(documents.__file__).resolve().parent
# Patterns built at run time from something other than a literal, each with why it stays linear.
DYNAMIC_PATTERNS = {
    # alternations of escaped search terms (whole words; CJK bigrams in a lookahead): literals
    # only, nothing to backtrack into
    "documents/retrieval/text.py",
}


def _modules() -> list[str]:
    return sorted(
        info.name
        for info in pkgutil.walk_packages(documents.__path__, "documents.")
        if ".migrations" not in info.name
    )


def _module_patterns() -> dict[str, re.Pattern[str]]:
    """Every compiled pattern a ``documents`` module holds, alone or in a tuple, list or set."""
    found: dict[str, re.Pattern[str]] = {}
    for name in _modules():
        for attribute, value in vars(importlib.import_module(name)).items():
            values = value if isinstance(value, tuple | list | frozenset | set) else (value,)
            for index, item in enumerate(values):
                if isinstance(item, re.Pattern) and isinstance(item.pattern, str):
                    found[f"{name}.{attribute}[{index}]"] = item
    return found


@functools.cache
def _re_calls() -> list[tuple[str, ast.Call, bool]]:
    """(file, call, inside a function) for every ``re.<function>(...)`` call under documents/."""
    return list(_scan_re_calls())


def _scan_re_calls() -> Iterator[tuple[str, ast.Call, bool]]:
    for path in sorted(DOCUMENTS.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        in_function: set[ast.AST] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                in_function.update(ast.walk(node))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "re"
                and node.func.attr in _PATTERN_FUNCTIONS
                and node.args
            ):
                yield str(path.relative_to(DOCUMENTS.parent)), node, node in in_function


_PATTERN_FUNCTIONS = {
    "compile",
    "match",
    "fullmatch",
    "search",
    "sub",
    "subn",
    "split",
    "findall",
    "finditer",
}


def _literal_patterns() -> dict[str, re.Pattern[str]]:
    """Literal patterns passed straight to ``re`` functions (module attributes are found above)."""
    found: dict[str, re.Pattern[str]] = {}
    for where, call, _ in _re_calls():
        first = call.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            found[f"{where}:{call.lineno}"] = re.compile(first.value)
    return found


def _distinct(named: dict[str, re.Pattern[str]]) -> dict[str, re.Pattern[str]]:
    by_source = {(pattern.pattern, pattern.flags): name for name, pattern in named.items()}
    return {name: named[name] for name in by_source.values()}


ALL_PATTERNS = _distinct({**_literal_patterns(), **_module_patterns()})


def test_patterns_are_found() -> None:
    # the collection itself works: the patterns this file's older tests are about are in it
    patterns = {pattern.pattern for pattern in ALL_PATTERNS.values()}
    assert any("-{3,}" in pattern for pattern in patterns)
    assert any(r"\[" in pattern for pattern in patterns)
    assert len(ALL_PATTERNS) > 25


def test_no_pattern_is_built_at_run_time_from_non_literals() -> None:
    # a pattern made inside a function from variables escapes the sweep below: hoist it to module
    # level (where the sweep imports it), or list it in DYNAMIC_PATTERNS with why it is linear
    built = [
        f"{where}:{call.lineno}"
        for where, call, inside in _re_calls()
        if inside
        and not isinstance(call.args[0], ast.Constant | ast.Name | ast.Attribute)
        and where not in DYNAMIC_PATTERNS
    ]
    assert built == []


@pytest.mark.parametrize("name", sorted(ALL_PATTERNS))
def test_pattern_stays_linear_on_generated_worst_cases(name: str) -> None:
    pattern = ALL_PATTERNS[name]
    for text in attacks(pattern, ATTACK_LENGTH):
        started = time.monotonic()
        pattern.search(text)
        elapsed = time.monotonic() - started
        assert elapsed < PATTERN_SECONDS, (
            f"{name} took {elapsed:.1f}s on {text[:24]!r}...{text[-8:]!r} ({len(text)} chars)"
        )


def test_the_generator_finds_the_known_shapes() -> None:
    # the sweep is only as good as its inputs: each classic shape gets an input that is slow on it
    for shape in (r"^[ \t]*x?[ \t]*$", r"<p[^>]*>", r"^-{3,}(?:\|[ \t]*)*\|?[ \t]*$"):
        pattern = re.compile(shape)
        slowest = 0.0
        # the input grows until one text takes over 20 ms: quadratic work gets there by a few
        # thousand characters (the cheapest shape, <p[^>]*>, took 19 ms on 8 K), a linear pattern
        # takes microseconds even on the largest size, so the bound tells them apart either way
        length = 2 * 1024
        while slowest <= 0.02 and length <= 64 * 1024:
            for text in attacks(pattern, length):
                started = time.monotonic()
                pattern.search(text)
                slowest = max(slowest, time.monotonic() - started)
                if slowest > 0.02:
                    break
            length *= 2
        assert slowest > 0.02, shape


# --- fuzz: Markdown-ish text built from the characters the patterns care about -------------------

_MARKUP_PIECES = st.sampled_from(
    [
        "|",
        "---",
        "-",
        ":",
        " ",
        "\t",
        "\n",
        "[",
        "]",
        "(",
        ")",
        "!",
        "*",
        "**",
        "_",
        "`",
        "```",
        "#",
        ">",
        "<p",
        "<",
        ">",
        "a",
        "1.",
        "=",
    ]
)
_FUZZ_SECONDS = 2.0


@given(
    pieces=st.lists(_MARKUP_PIECES, max_size=40), run=st.sampled_from([" ", "\t", "-", "[", "|", "*", "a"])
)
@hypothesis_settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_fuzzed_markup_is_sniffed_and_parsed_at_once(tmp_path: Path, pieces: list[str], run: str) -> None:
    # random structure with one long run of a single character spliced in: the shape that made
    # every backtracking pattern found so far slow
    cut = len(pieces) // 2
    text = "# Harbor\n\n" + "".join(pieces[:cut]) + run * (LINE // 4) + "".join(pieces[cut:]) + "x\n"
    started = time.monotonic()
    sniff(text.encode(), filename="notes.md")
    (page,) = parse(files.save(tmp_path, "upload", text.encode()), Kind.MARKDOWN)
    elapsed = time.monotonic() - started
    assert page.blocks[0].text == "Harbor"
    assert elapsed < _FUZZ_SECONDS, f"took {elapsed:.1f}s"
