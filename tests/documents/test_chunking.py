"""Chunking: deterministic, structure-aware, CJK-aware, lossless, never above the maximum."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from documents.engines.chunking import Block, Chunk, ChunkInputPage, chunk_pages, estimate_tokens

TARGET, MAXIMUM = 350, 500

ENGLISH_SENTENCES = [
    f"Sentence {n} explains how invoice number {n} was checked against the purchase order and approved."
    for n in range(60)
]
CHINESE_SENTENCES = [f"第{n}条说明了供应商如何在三十天内提交发票并完成审核流程。" for n in range(80)]


def heading(text: str, level: int = 1) -> Block:
    return Block("heading", text, level)


def paragraph(text: str) -> Block:
    return Block("paragraph", text)


def table(rows: int, columns: int = 4) -> Block:
    header = "| " + " | ".join(f"column {c}" for c in range(columns)) + " |"
    divider = "|" + "---|" * columns
    body = [
        f"| row {r} | " + " | ".join(f"value {r}-{c}" for c in range(1, columns)) + " |" for r in range(rows)
    ]
    return Block("table", "\n".join([header, divider, *body]))


def body(chunk: Chunk) -> str:
    """The chunk's text without the heading-path line it starts with."""
    prefix = " > ".join(chunk.heading_path)
    return chunk.text[len(prefix) :].lstrip("\n") if prefix else chunk.text


def report() -> list[ChunkInputPage]:
    """A realistic mixed document over four pages."""
    return [
        ChunkInputPage(
            1, [heading("Annual report"), paragraph("This report covers the year. It has three parts.")]
        ),
        ChunkInputPage(
            2,
            [
                heading("Finance", 2),
                paragraph(" ".join(ENGLISH_SENTENCES[:30])),
                table(12),
                Block("list", "- first item\n- second item\n- third item"),
            ],
        ),
        ChunkInputPage(3, [paragraph(" ".join(ENGLISH_SENTENCES[30:])), heading("供应商", 2)]),
        ChunkInputPage(
            4, [paragraph("".join(CHINESE_SENTENCES)), Block("code", "def total(xs):\n    return sum(xs)")]
        ),
    ]


def test_same_input_gives_identical_chunks() -> None:
    first = chunk_pages(report())
    second = chunk_pages(report())

    assert first == second
    assert len(first) > 5, "the document must be long enough to need several chunks"


def test_ordinals_run_from_zero_without_gaps() -> None:
    assert [chunk.ordinal for chunk in chunk_pages(report())] == list(range(len(chunk_pages(report()))))


def test_every_sentence_is_kept_whole_in_some_chunk() -> None:
    chunks = chunk_pages(report())

    for sentence in ENGLISH_SENTENCES + CHINESE_SENTENCES:
        assert any(sentence in chunk.text for chunk in chunks), sentence


def test_no_chunk_is_above_the_maximum() -> None:
    for chunk in chunk_pages(report(), target_tokens=TARGET, max_tokens=MAXIMUM):
        assert chunk.token_estimate <= MAXIMUM
        assert estimate_tokens(chunk.text) == chunk.token_estimate
        assert chunk.char_count == len(chunk.text)


def test_heading_starts_a_chunk_and_prefixes_its_path() -> None:
    pages = [
        ChunkInputPage(
            1,
            [
                heading("Guide"),
                paragraph("Welcome."),
                heading("Install", 2),
                paragraph("Run the installer."),
                heading("Linux", 3),
                paragraph("Use the package."),
                heading("Usage", 2),
                paragraph("Open the app."),
                heading("Appendix"),
                paragraph("Extra notes."),
            ],
        )
    ]

    chunks = chunk_pages(pages)

    assert [chunk.heading_path for chunk in chunks] == [
        ("Guide",),
        ("Guide", "Install"),
        ("Guide", "Install", "Linux"),
        ("Guide", "Usage"),
        ("Appendix",),
    ]
    assert chunks[2].text == "Guide > Install > Linux\n\nUse the package."
    assert chunks[3].text == "Guide > Usage\n\nOpen the app."


def test_text_before_the_first_heading_has_no_path() -> None:
    chunks = chunk_pages([ChunkInputPage(1, [paragraph("Cover page."), heading("Intro"), paragraph("Hi.")])])

    assert [(chunk.heading_path, chunk.text) for chunk in chunks] == [
        ((), "Cover page."),
        (("Intro",), "Intro\n\nHi."),
    ]


def test_empty_section_keeps_its_heading_unless_a_subsection_carries_it() -> None:
    pages = [
        ChunkInputPage(
            1,
            [
                heading("Part one"),
                heading("Chapter", 2),
                paragraph("Text."),
                heading("Empty part"),
                heading("Last"),
            ],
        )
    ]

    chunks = chunk_pages(pages)

    # "Part one" lives on in its subsection's path; "Empty part" and "Last" would otherwise vanish.
    assert [chunk.text for chunk in chunks] == ["Part one > Chapter\n\nText.", "Empty part", "Last"]


def test_page_range_follows_text_across_page_boundaries() -> None:
    pages = [
        ChunkInputPage(1, [heading("Scope"), paragraph("Starts on page one.")]),
        ChunkInputPage(2, [paragraph("Continues on page two.")]),
        ChunkInputPage(3, [heading("Next"), paragraph("Only page three.")]),
        ChunkInputPage(4, [paragraph("And page four.")]),
    ]

    chunks = chunk_pages(pages)

    assert [(chunk.page_start, chunk.page_end) for chunk in chunks] == [(1, 2), (3, 4)]


def test_page_range_of_split_text_is_the_pages_of_its_parts() -> None:
    pages = [
        ChunkInputPage(n, [paragraph(" ".join(ENGLISH_SENTENCES[10 * n : 10 * n + 10]))]) for n in range(6)
    ]

    chunks = chunk_pages(pages, target_tokens=150, max_tokens=200)

    for chunk in chunks:
        numbers = {int(n) // 10 for n in re.findall(r"Sentence (\d+)", chunk.text)}
        assert (chunk.page_start, chunk.page_end) == (min(numbers), max(numbers))


def test_table_that_fits_the_maximum_stays_whole_in_its_own_chunk() -> None:
    big_table = table(18)
    assert TARGET < estimate_tokens(big_table.text) <= MAXIMUM, "the table must exceed the target only"

    chunks = chunk_pages([ChunkInputPage(1, [paragraph("Intro paragraph."), big_table, paragraph("After.")])])

    assert [chunk.text for chunk in chunks] == ["Intro paragraph.", big_table.text, "After."]


def test_table_above_the_maximum_splits_between_rows() -> None:
    huge = table(80)

    chunks = chunk_pages([ChunkInputPage(1, [huge])])

    assert len(chunks) > 1
    rows = huge.text.splitlines()
    for chunk in chunks:
        assert chunk.token_estimate <= MAXIMUM
        assert all(line in rows for line in chunk.text.splitlines()), "a row was cut in the middle"
    assert "\n".join(chunk.text for chunk in chunks) == huge.text


def test_code_keeps_its_indentation() -> None:
    code = "    indented_first_line()\n        deeper()\n"

    [chunk] = chunk_pages([ChunkInputPage(1, [Block("code", code)])])

    assert chunk.text == "    indented_first_line()\n        deeper()"


def test_long_paragraph_splits_at_sentence_ends() -> None:
    chunks = chunk_pages([ChunkInputPage(1, [paragraph(" ".join(ENGLISH_SENTENCES))])])

    assert len(chunks) > 1
    for chunk in chunks:
        assert chunk.text.endswith("approved."), chunk.text[-40:]
        assert TARGET * 0.8 <= chunk.token_estimate <= TARGET or chunk is chunks[-1]


def test_chinese_paragraph_splits_at_chinese_sentence_ends() -> None:
    enders = "。？；！"  # noqa: RUF001 (full-width punctuation is the point)
    text = "".join(s[:-1] + enders[n % 4] for n, s in enumerate(CHINESE_SENTENCES))

    chunks = chunk_pages([ChunkInputPage(1, [paragraph(text)])])

    assert len(chunks) > 1
    assert all(chunk.text[0] == "第" and chunk.text[-1] in enders for chunk in chunks)
    assert "".join(chunk.text for chunk in chunks) == text


def test_cjk_characters_count_as_one_token_and_latin_words_as_more() -> None:
    assert estimate_tokens("供应商提交发票") == 7
    assert estimate_tokens("supplier submits invoice") == 4  # 3 words x 1.3, rounded up
    assert estimate_tokens("The supplier, 供应商.") == 8  # 2 words (2.6), 2 punctuation, 3 characters


def test_chinese_text_is_sized_by_characters() -> None:
    # 2,400 Chinese characters with no spaces: a word-based count would see almost nothing.
    chunks = chunk_pages([ChunkInputPage(1, [paragraph("".join(CHINESE_SENTENCES[:80]))])])

    assert sum(chunk.char_count for chunk in chunks) >= 2000
    assert all(chunk.char_count <= MAXIMUM for chunk in chunks)
    assert len(chunks) >= 6


def test_sentence_above_the_maximum_splits_between_words() -> None:
    run_on = " ".join(f"word{n}" for n in range(1000))

    chunks = chunk_pages([ChunkInputPage(1, [paragraph(run_on)])])

    assert all(chunk.token_estimate <= MAXIMUM for chunk in chunks)
    assert " ".join(chunk.text for chunk in chunks) == run_on


def test_unbroken_blob_is_cut_into_pieces_that_fit() -> None:
    blob = "x" * 5000

    chunks = chunk_pages([ChunkInputPage(1, [paragraph(blob)])])

    assert "".join(chunk.text for chunk in chunks) == blob
    assert all(chunk.token_estimate <= MAXIMUM for chunk in chunks)


def test_very_long_heading_is_kept_as_text() -> None:
    long_heading = " ".join(["Heading"] * 120)

    chunks = chunk_pages(
        [ChunkInputPage(1, [heading("Short"), heading(long_heading, 2), paragraph("Body.")])]
    )

    assert all(len(part) < 100 for chunk in chunks for part in chunk.heading_path)
    assert long_heading in chunks[0].text


def test_invalid_input_is_rejected() -> None:
    with pytest.raises(ValueError, match="block kind"):
        Block("figure", "x")
    with pytest.raises(ValueError, match="target_tokens"):
        chunk_pages([], target_tokens=600, max_tokens=500)


def test_empty_input_gives_no_chunks() -> None:
    assert chunk_pages([ChunkInputPage(1, [paragraph("   "), Block("table", "\n")])]) == []


# --- properties over generated documents --------------------------------------------------------

latin_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABC0123456789", min_size=1, max_size=12)
cjk_run = st.text(alphabet="的一是在不了有和人这中大为上个国我以要他。！？；，", min_size=1, max_size=40)  # noqa: RUF001
punctuation = st.sampled_from([".", ",", "!", "?", ";", "...", "-", "|", "(", ")", "\n", "\n\n", "e.g."])
token = st.one_of(latin_word, cjk_run, punctuation)
block_text = st.lists(token, min_size=1, max_size=400).map(" ".join)
body_block = st.builds(Block, st.sampled_from(["paragraph", "table", "list", "code"]), block_text)
heading_block = st.builds(Block, st.just("heading"), latin_word, st.integers(1, 3))
page_blocks = st.lists(st.one_of(body_block, body_block, heading_block), max_size=6)
documents = st.lists(page_blocks, min_size=1, max_size=5).map(
    lambda pages: [ChunkInputPage(number, blocks) for number, blocks in enumerate(pages, start=1)]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pages=documents, target=st.integers(80, 300), extra=st.integers(0, 200))
def test_generated_documents_keep_all_text_within_limits(
    pages: list[ChunkInputPage], target: int, extra: int
) -> None:
    chunks = chunk_pages(pages, target_tokens=target, max_tokens=target + extra)

    assert chunks == chunk_pages(pages, target_tokens=target, max_tokens=target + extra)
    assert [chunk.ordinal for chunk in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert 0 < chunk.token_estimate <= target + extra
        assert chunk.page_start <= chunk.page_end
    # Nothing is lost or invented: bodies hold exactly the body blocks' text, in order.
    expected = "".join(block.text for page in pages for block in page.blocks if block.kind != "heading")
    assert re.sub(r"\s", "", "".join(body(chunk) for chunk in chunks)) == re.sub(r"\s", "", expected)
    headings = {block.text for page in pages for block in page.blocks if block.kind == "heading"}
    assert headings <= {part for chunk in chunks for part in chunk.heading_path}
