"""``documents.bulk_insert.insert_rows``: the stages' batch inserts write what ``bulk_create`` wrote
(JSON, bytes, UUID keys, foreign keys), keep rows already there when asked to, and on
PostgreSQL send their arrays as parameters the server binds."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from documents.bulk_insert import insert_rows
from documents.models import Chunk, ChunkVector, Page
from documents.retrieval.index import VECTOR_FIELDS
from documents.stages.chunk import CHUNK_FIELDS
from documents.stages.parse import PAGE_FIELDS
from tests.conftest import is_postgres
from tests.documents import files
from tests.documents.helpers import make_tenant, upload

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def version(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return upload(make_tenant("acme"), files.text_pdf(["one page"]), "rows.pdf").version


def test_rows_are_written_as_the_models_read_them(version):
    blocks = [{"kind": "heading", "text": "Tide tables", "level": 1}]
    with transaction.atomic():
        insert_rows(
            Page,
            PAGE_FIELDS,
            [
                (version.pk, 1, "a 'quoted' text\\n", True, blocks, "", 0),
                (version.pk, 2, "", False, [], "", 0),
            ],
        )
        insert_rows(Chunk, CHUNK_FIELDS, [(version.pk, 0, "chunk \u00e9\u6e2f", 1, 2, ["Tide", "Bay 5"])])
        insert_rows(ChunkVector, VECTOR_FIELDS, [(version.pk, 0, 0, "hashing-x", b"\x00\x01\xfe\xff" * 3)])
    pages = list(Page.objects.filter(version=version).order_by("number"))
    assert [(p.number, p.text, p.needs_ocr, p.blocks) for p in pages] == [
        (1, "a 'quoted' text\\n", True, blocks),
        (2, "", False, []),
    ]
    chunk = Chunk.objects.get(version=version)
    assert (chunk.text, chunk.page_start, chunk.page_end, chunk.heading_path) == (
        "chunk \u00e9\u6e2f",
        1,
        2,
        ["Tide", "Bay 5"],
    )
    assert bytes(ChunkVector.objects.get(version=version).vector) == b"\x00\x01\xfe\xff" * 3


def test_skip_existing_keeps_the_row_there_and_adds_the_others(version):
    insert_rows(Page, PAGE_FIELDS, [(version.pk, 1, "first", False, [], "", 0)])
    insert_rows(
        Page,
        PAGE_FIELDS,
        [(version.pk, 1, "replayed", False, [], "", 0), (version.pk, 2, "new", False, [], "", 0)],
        skip_existing=True,
    )
    assert dict(Page.objects.filter(version=version).values_list("number", "text")) == {1: "first", 2: "new"}
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_rows(Page, PAGE_FIELDS, [(version.pk, 1, "again", False, [], "", 0)])


@pytest.mark.postgres
def test_postgres_sends_the_values_as_parameters_not_in_the_sql_text(version):
    assert is_postgres()
    with transaction.atomic(), CaptureQueriesContext(connection) as captured:
        insert_rows(Page, PAGE_FIELDS, [(version.pk, 1, "y" * 5000, False, [], "", 0)])
    (query,) = captured.captured_queries
    assert "y" * 100 not in query["sql"] and len(query["sql"]) < 500  # one statement, any batch size
    assert Page.objects.get(version=version).text == "y" * 5000
