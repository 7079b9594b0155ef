"""Document attributes: the one service's validation (codes and fields), replace semantics, the
upload path, and that what it stores is what the search filters read on this pass's database."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from documents.attributes import MAX_ATTRIBUTES, MAX_SAFE_INTEGER, check_value
from documents.models import Document, DocumentVersion
from documents.retrieval.filters import filter_sql, parse_filter
from documents.services.attributes import (
    DocumentInputError,
    attributes_from_json,
    check_attributes,
    document_set_attributes,
    document_update,
)
from jobs.models import Job
from tests.documents.helpers import make_tenant, upload

pytestmark = pytest.mark.django_db

GOOD = {
    "department": "legal",
    "year": 2024,
    "score": 4.5,
    "confidential": False,
    "signed_on": "2024-02-29",
    "team.name-x": "研发部",
    "_private": "",
}


# --- pure rules ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("legal", "string"),
        ("", "string"),
        ("2024-02-29", "date"),
        ("2024-02-29T10:00", "string"),
        (2024, "number"),
        (-1.5, "number"),
        (MAX_SAFE_INTEGER, "number"),
        (True, "boolean"),
        (False, "boolean"),
    ],
)
def test_each_kind_of_value_is_recognised(value, kind):
    assert check_value(value) == kind


def test_valid_attributes_pass_unchanged():
    assert check_attributes(GOOD) == GOOD
    assert check_attributes({}) == {}


@pytest.mark.parametrize(
    ("raw", "field", "code"),
    [
        (["a"], "attributes", "attributes_not_object"),
        ("year=2024", "attributes", "attributes_not_object"),
        (None, "attributes", "attributes_not_object"),
        ({f"k{i}": i for i in range(MAX_ATTRIBUTES + 1)}, "attributes", "too_many_attributes"),
        ({"1st": "x"}, "attributes", "invalid_attribute_key"),
        ({"with space": "x"}, "attributes", "invalid_attribute_key"),
        ({'quote"': "x"}, "attributes", "invalid_attribute_key"),
        ({"k" * 65: "x"}, "attributes", "invalid_attribute_key"),
        ({"": "x"}, "attributes", "invalid_attribute_key"),
        ({"year": None}, "attributes.year", "invalid_value_type"),
        ({"tags": ["a", "b"]}, "attributes.tags", "invalid_value_type"),
        ({"meta": {"a": 1}}, "attributes.meta", "invalid_value_type"),
        ({"note": "x" * 513}, "attributes.note", "string_too_long"),
        ({"due": "2023-02-29"}, "attributes.due", "invalid_date"),
        ({"due": "2024-13-01"}, "attributes.due", "invalid_date"),
        ({"big": MAX_SAFE_INTEGER + 1}, "attributes.big", "number_out_of_range"),
        ({"nan": float("nan")}, "attributes.nan", "number_out_of_range"),
        ({"inf": float("inf")}, "attributes.inf", "number_out_of_range"),
    ],
)
def test_bad_attributes_get_a_specific_code_and_field(raw, field, code):
    with pytest.raises(DocumentInputError) as caught:
        check_attributes(raw)
    assert (caught.value.field, caught.value.code) == (field, code)
    assert caught.value.message


def test_sixteen_attributes_are_allowed():
    sixteen = {f"k{i}": i for i in range(MAX_ATTRIBUTES)}
    assert check_attributes(sixteen) == sixteen


def test_a_refused_key_is_shown_short_and_printable():
    with pytest.raises(DocumentInputError) as caught:
        check_attributes({"bad key\x00\n" + "x" * 500: 1})
    assert "bad key" in caught.value.message
    assert "\x00" not in caught.value.message
    assert "x" * 41 not in caught.value.message


def test_attributes_as_json_text():
    assert attributes_from_json('{"year": 2024}') == {"year": 2024}
    with pytest.raises(DocumentInputError) as caught:
        attributes_from_json("{year: 2024}")
    assert (caught.value.field, caught.value.code) == ("attributes", "attributes_not_json")
    with pytest.raises(DocumentInputError) as caught:
        attributes_from_json("[1]")
    assert caught.value.code == "attributes_not_object"


# --- the service on the database -----------------------------------------------------------------


@pytest.fixture
def media(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return Path(settings.MEDIA_ROOT)


@pytest.fixture
def document(media: Path) -> Document:
    return upload(make_tenant(), b"Notes about the harbor.\n", "notes.txt").document


def stored_attributes(document: Document) -> dict[str, Any]:
    return dict(Document.objects.get(pk=document.pk).attributes)


def test_set_attributes_replaces_them_all(document: Document):
    document_set_attributes(document=document, attributes={"year": 2023, "department": "sales"})
    document_set_attributes(document=document, attributes={"year": 2024})
    assert stored_attributes(document) == {"year": 2024}
    assert document.attributes == {"year": 2024}


def test_set_attributes_round_trips_every_kind(document: Document):
    document_set_attributes(document=document, attributes=GOOD)
    stored = stored_attributes(document)
    assert stored == GOOD
    assert isinstance(stored["year"], int)
    assert stored["confidential"] is False


def test_refused_attributes_change_nothing(document: Document):
    document_set_attributes(document=document, attributes={"year": 2023})
    with pytest.raises(DocumentInputError):
        document_set_attributes(document=document, attributes={"year": 2024, "due": "2024-02-30"})
    assert stored_attributes(document) == {"year": 2023}


def test_update_checks_title_and_attributes_before_writing_either(document: Document):
    before = Document.objects.get(pk=document.pk).title
    with pytest.raises(DocumentInputError) as caught:
        document_update(document=document, title="New title", attributes={"x": [1]})
    assert caught.value.field == "attributes.x"
    assert Document.objects.get(pk=document.pk).title == before
    with pytest.raises(DocumentInputError) as caught:
        document_update(document=document, title="   ", attributes={"x": 1})
    assert (caught.value.field, caught.value.code) == ("title", "invalid_title")
    assert stored_attributes(document) == {}


def test_update_changes_the_title_alone(document: Document):
    document_set_attributes(document=document, attributes={"year": 2023})
    document_update(document=document, title="  Harbor report ")
    fresh = Document.objects.get(pk=document.pk)
    assert (fresh.title, fresh.attributes) == ("Harbor report", {"year": 2023})


def test_upload_stores_attributes_with_the_new_document(media: Path):
    result = upload_with(make_tenant(), {"year": 2024, "public": True})
    assert stored_attributes(result.document) == {"year": 2024, "public": True}


def test_upload_without_attributes_starts_with_none(document: Document):
    assert stored_attributes(document) == {}


def test_a_new_version_with_attributes_replaces_them(document: Document):
    document_set_attributes(document=document, attributes={"year": 2023, "draft": True})
    tenant = document.tenant
    upload_with(tenant, {"year": 2024}, data=b"Second version of the notes.\n", document=document)
    assert stored_attributes(document) == {"year": 2024}
    upload_with(tenant, None, data=b"Third version of the notes.\n", document=document)
    assert stored_attributes(document) == {"year": 2024}


def test_upload_with_bad_attributes_stores_nothing(media: Path):
    tenant = make_tenant()
    with pytest.raises(DocumentInputError) as caught:
        upload_with(tenant, {"year": 2024, "bad key": 1})
    assert caught.value.code == "invalid_attribute_key"
    assert not Document.objects.exists()
    assert not DocumentVersion.objects.exists()
    assert not Job.objects.exists()
    assert not media.exists() or not any(p.is_file() for p in media.rglob("*"))


def upload_with(tenant: Any, attributes: Any, *, data: bytes = b"Harbor notes.\n", document: Any = None):
    from documents.services.upload import document_upload

    return document_upload(
        tenant=tenant, data=data, filename="notes.txt", attributes=attributes, document=document
    )


# --- what the service stores is what the filters read (this pass's database) ------------------


def test_filters_over_the_document_table_see_the_stored_attributes(media: Path):
    tenant = make_tenant()
    docs = {
        name: upload_with(tenant, attrs, data=f"Notes {name}.\n".encode()).document
        for name, attrs in {
            "a": {"year": 2024, "signed_on": "2024-03-01", "dept": "legal"},
            "b": {"year": 2023.5, "signed_on": "2023-12-31", "dept": "sales", "draft": True},
            "c": {},
        }.items()
    }
    column = f'"{Document._meta.db_table}"."attributes"'

    def matching(obj: dict[str, Any]) -> set[str]:
        sql, params = filter_sql(parse_filter(obj), connection.vendor, column)
        found = Document.objects.filter(tenant=tenant).extra(where=[sql], params=params)
        return {name for name, d in docs.items() if d.pk in {x.pk for x in found}}

    assert matching({"type": "gt", "key": "year", "value": 2023}) == {"a", "b"}
    assert matching({"type": "lt", "key": "signed_on", "value": "2024-01-01"}) == {"b"}
    assert matching({"type": "ne", "key": "draft", "value": True}) == {"a", "c"}
    assert matching({"type": "in", "key": "dept", "value": ["legal", "hr"]}) == {"a"}
    document_set_attributes(document=docs["c"], attributes={"dept": "hr"})
    assert matching({"type": "in", "key": "dept", "value": ["legal", "hr"]}) == {"a", "c"}
