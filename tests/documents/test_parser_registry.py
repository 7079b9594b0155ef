"""The parser registry: a parser module plugs in without an edit anywhere else, a kind claimed
twice is refused, and the registry and its parsers stay free of Django (the sandbox child has none)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from documents import parsers
from documents.engines.parsing import page_count, parse, parse_document
from documents.engines.sniff import Kind, sniff
from documents.engines.validation import validate_upload
from documents.parsers import FileKind, ParserConflict, UnknownKind
from tests.documents import csv_parser, files

ROOT = Path(__file__).resolve().parents[2]
ROWS = b"name,tons\ncod,12\nherring,30\n"


@pytest.fixture
def csv_registered() -> Iterator[parsers.Parser]:
    with csv_parser.registered() as parser:
        yield parser


def test_a_registered_parser_module_is_used_to_parse_and_count(
    tmp_path: Path, csv_registered: parsers.Parser
) -> None:
    path = files.save(tmp_path, "upload", ROWS)
    assert page_count(path, "csv") == 3
    assert [page.text for page in parse(path, "csv", start_page=1)] == ["cod | 12", "herring | 30"]
    assert [page.number for page in parse_document(path, "csv").pages] == [1, 2, 3]


def test_a_registered_parser_sniffs_and_names_its_kind_at_upload(csv_registered: parsers.Parser) -> None:
    sniffed = sniff(ROWS, filename="catch.csv")
    assert sniffed is not None and (sniffed.kind, sniffed.encoding) == ("csv", "utf-8")
    upload = validate_upload(ROWS, filename="catch.csv", max_bytes=1024)
    assert (upload.kind, upload.content_type) == ("csv", "text/csv")
    # Text the toy does not claim still falls through to the built-in text sniffer.
    plain = sniff(b"Just a sentence.", filename="catch.csv")
    assert plain is not None and plain.kind is Kind.TEXT


def test_an_unregistered_kind_has_no_parser(tmp_path: Path) -> None:
    path = files.save(tmp_path, "upload", ROWS)
    with pytest.raises(UnknownKind):
        page_count(path, "csv")
    sniffed = sniff(ROWS, filename="catch.csv")
    assert sniffed is not None and sniffed.kind is Kind.TEXT


def test_a_kind_claimed_twice_is_refused_and_changes_nothing(
    tmp_path: Path, csv_registered: parsers.Parser
) -> None:
    with pytest.raises(ParserConflict):
        parsers.register(csv_parser.PARSER)
    impostor = parsers.Parser(
        kinds=(FileKind("tsv", "text/tab-separated-values"), FileKind(Kind.PDF, "application/pdf")),
        pages=csv_parser.PARSER.pages,
        document=csv_parser.PARSER.document,
    )
    with pytest.raises(ParserConflict):
        parsers.register(impostor)
    assert "tsv" not in parsers.kind_names()
    assert parsers.parser_for(Kind.PDF) is not impostor
    assert parsers.registered().count(csv_registered) == 1
    pdf = files.save(tmp_path, "report.pdf", files.text_pdf())
    assert [page.text for page in parse(pdf, Kind.PDF)] == list(files.PAGE_PHRASES)


def test_the_modules_of_the_package_register_every_built_in_kind() -> None:
    assert set(parsers.kind_names()) >= set(Kind)
    assert parsers.file_kind(Kind.DOCX).content_type.endswith("wordprocessingml.document")


def test_the_registry_and_its_parsers_import_no_django() -> None:
    script = (
        "import sys\n"
        "from documents import parsers\n"
        "import documents.engines.parsing, documents.engines.sniff\n"
        "parsers.kind_names()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'django'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]"
