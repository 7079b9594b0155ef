"""Search through the REST API: modes, the JSON body with attribute filters and document ids (run
inside the index query), marked snippets, fused scores with their components, and bad filters
answered 400 with the field named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.api.conftest import Caller, assert_error, drive

pytestmark = pytest.mark.django_db(transaction=True)  # runs jobs: workers commit and use threads


@pytest.fixture(autouse=True)
def media(settings: Any, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"


def ingest(caller: Caller, text: str, name: str, attributes: dict[str, Any]) -> str:
    form = {"file": SimpleUploadedFile(name, text.encode()), "attributes": json.dumps(attributes)}
    response = caller.client.post("/api/documents/", form, format="multipart")
    assert response.status_code == 201, response.content
    drive(response.json()["job_id"])
    return str(response.json()["document_id"])


@pytest.fixture
def reports(alice: Caller) -> dict[str, str]:
    return {
        "sales-2023": ingest(
            alice, "Harbor sales report for the year.", "s23.txt", {"dept": "sales", "year": 2023}
        ),
        "sales-2024": ingest(
            alice, "Harbor sales report, next year.", "s24.txt", {"dept": "sales", "year": 2024}
        ),
        "legal-2024": ingest(
            alice, "Harbor legal report <b>draft</b>.", "l24.txt", {"dept": "legal", "year": 2024}
        ),
    }


def post(caller: Caller, body: dict[str, Any]) -> Any:
    return caller.client.post("/api/search", json.dumps(body), content_type="application/json")


def test_post_search_filters_by_attributes_and_document_ids_inside_the_query(alice: Caller, reports):
    everything = post(alice, {"query": "harbor report", "k": 10}).json()["results"]
    assert {h["document_id"] for h in everything} == set(reports.values())

    body = {"query": "harbor report", "k": 1, "filters": {"type": "eq", "key": "dept", "value": "legal"}}
    hits = post(alice, body).json()["results"]
    assert [h["document_id"] for h in hits] == [reports["legal-2024"]]
    assert hits[0]["attributes"] == {"dept": "legal", "year": 2024}

    both = {
        "type": "and",
        "filters": [
            {"type": "eq", "key": "dept", "value": "sales"},
            {"type": "gte", "key": "year", "value": 2024},
        ],
    }
    hits = post(alice, {"query": "harbor report", "filters": both}).json()["results"]
    assert {h["document_id"] for h in hits} == {reports["sales-2024"]}

    ids = [reports["sales-2023"], reports["legal-2024"]]
    hits = post(alice, {"query": "harbor report", "document_ids": ids}).json()["results"]
    assert {h["document_id"] for h in hits} == set(ids)


def test_each_mode_reports_its_components_and_a_fused_score_between_0_and_1(alice: Caller, reports):
    for mode, lists in [
        ("hybrid", {"lexical", "semantic"}),
        ("lexical", {"lexical"}),
        ("semantic", {"semantic"}),
    ]:
        response = alice.client.get("/api/search", {"q": "harbor legal report draft", "mode": mode})
        body = response.json()
        assert response.status_code == 200 and body["mode"] == mode
        top = body["results"][0]
        assert top["document_id"] == reports["legal-2024"], mode
        assert set(top["components"]) == lists
        assert all(c["rank"] == 1 for c in top["components"].values())
        assert 0 < top["score"] <= 1


def test_the_highlight_marks_matched_terms_and_escapes_the_text(alice: Caller, reports):
    hits = post(alice, {"query": "draft", "mode": "lexical"}).json()["results"]
    assert hits[0]["snippet"] == "Harbor legal report <b>draft</b>."
    assert hits[0]["highlight"] == "Harbor legal report &lt;b&gt;<mark>draft</mark>&lt;/b&gt;."


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"query": "x", "filters": {"type": "eq", "key": "dept"}}, "invalid_filter", "filters.value"),
        (
            {"query": "x", "filters": {"type": "near", "key": "a", "value": 1}},
            "invalid_filter",
            "filters.type",
        ),
        ({"query": "x", "mode": "fuzzy"}, "invalid", "mode"),
        ({"query": "x", "document_ids": ["not-a-uuid"]}, "invalid", "document_ids"),
        ({"k": 3}, "invalid", "query"),
    ],
    ids=["no-value", "bad-operator", "bad-mode", "bad-id", "no-query"],
)
def test_a_bad_search_body_is_400_naming_the_field(
    alice: Caller, body: dict[str, Any], code: str, field: str
):
    error = assert_error(post(alice, body), 400, code)
    assert field in error["detail"], error


def test_another_tenant_naming_our_document_ids_finds_nothing(alice: Caller, mallory: Caller, reports):
    body = {"query": "harbor report", "document_ids": list(reports.values())}
    assert post(mallory, body).json()["results"] == []
    assert len(post(alice, body).json()["results"]) == 3
