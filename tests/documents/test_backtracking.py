"""Pattern-based reading (type sniffing, Markdown inline markup) stays linear on hostile lines.

A 64 KB line of ``[`` took 8.4 s in the upload request and a 2 MB one froze both workers for
minutes: the link pattern backtracked over the whole line from every
``[``. Each input below took seconds (quadratic) before the patterns were rewritten; now they take
milliseconds. The bound is a liveness margin (a frozen parser takes many seconds), not a speed.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from documents.engines.parsing import parse
from documents.engines.sniff import Kind, sniff
from tests.documents import files

LINE = 64 * 1024
LIVENESS_SECONDS = 2.0

HOSTILE_LINES = [
    pytest.param("[" * LINE, id="open-brackets"),
    pytest.param("![" * (LINE // 2), id="image-openers"),
    pytest.param("[x](" * (LINE // 4), id="unclosed-link-targets"),
    pytest.param("[" + "a" * LINE + "](", id="long-label-no-target"),
    pytest.param("[a](" + "b" * LINE, id="long-target-no-close"),
    pytest.param("**" + "a*" * (LINE // 2), id="emphasis-runs"),
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
