"""An API error speaks one language: the request's. The code stays English for programs; the
message and the detail's messages are both translated (a Chinese client used to get an English
message beside DRF's Chinese field errors)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import translation

from documents.models import Batch, BatchItem
from documents.retrieval.filters import FilterError, parse_filter
from documents.texts import Text, localize
from tests.api.conftest import Caller, assert_error

pytestmark = pytest.mark.django_db
CHINESE: dict[str, Any] = {"HTTP_ACCEPT_LANGUAGE": "zh-hans"}


def search(caller: Caller, body: Any, **headers: Any) -> Any:
    return caller.client.post("/api/search", json.dumps(body), content_type="application/json", **headers)


def test_a_missing_field_is_refused_in_chinese_in_the_message_and_the_detail(alice: Caller):
    error = assert_error(search(alice, {}, **CHINESE), 400, "invalid")
    assert error["message"] == "请求无效。"
    assert error["detail"] == {"query": ["该字段是必填项。"]}


def test_a_bad_filter_is_refused_in_chinese_with_its_values_kept(alice: Caller):
    body = {"query": "harbor", "filters": {"type": "eq", "key": "year", "value": [1, 2]}}
    error = assert_error(search(alice, body, **CHINESE), 400, "invalid_filter")
    said = "'eq' 只接受一个值；列表请使用 'in' 或 'nin'。"  # noqa: RUF001 (Chinese punctuation)
    assert error["message"] == said
    assert error["detail"] == {"filters.value": [said]}


def test_a_refused_attribute_is_refused_in_chinese(alice: Caller):
    document = alice.uploaded()["document_id"]
    response = alice.client.patch(
        f"/api/documents/{document}/",
        json.dumps({"attributes": {"year": 2**60}}),
        content_type="application/json",
        **CHINESE,
    )
    error = assert_error(response, 400, "number_out_of_range")
    assert error["message"] == "整数必须在 ±9007199254740991 以内。"
    assert error["detail"] == {"attributes.year": ["整数必须在 ±9007199254740991 以内。"]}


def test_not_found_and_unauthenticated_answers_are_in_chinese(alice: Caller):
    missing = alice.client.get("/api/documents/00000000-0000-0000-0000-000000000000/", **CHINESE)
    assert assert_error(missing, 404, "not_found")["message"] == "未找到。"
    alice.client.credentials()
    refused = alice.client.get("/api/documents/", **CHINESE)
    assert assert_error(refused, 401, "not_authenticated")["message"] == "需要身份验证：请发送令牌或登录。"  # noqa: RUF001


def test_an_english_request_gets_the_same_errors_in_english(alice: Caller):
    error = assert_error(search(alice, {}), 400, "invalid")
    assert error["message"] == "The request is not valid."
    assert error["detail"] == {"query": ["This field is required."]}
    body = {"query": "harbor", "filters": {"type": "near"}}
    error = assert_error(search(alice, body), 400, "invalid_filter")
    assert error["message"] == "Must be one of: eq, ne, gt, gte, lt, lte, in, nin, and, or."


def test_a_refusal_stored_for_later_stays_english_whatever_the_request_language(alice: Caller, settings):
    settings.DOCUMENTS_MAX_UPLOAD_BYTES = 10
    big = SimpleUploadedFile("big.txt", b"More than ten bytes of text.")
    response = alice.client.post("/api/batches/", {"files": [big]}, format="multipart", **CHINESE)
    assert response.status_code < 300, response.content
    item = BatchItem.objects.get(batch=Batch.objects.get())
    assert item.error_message == "The file is larger than the limit of 10 bytes."


# --- the message type: English as a str, translatable at the edge ------------------------------


def test_a_text_is_its_english_and_is_said_in_the_active_language():
    with pytest.raises(FilterError) as refused:
        parse_filter({"type": "in", "key": "year", "value": []})
    message = refused.value.message
    assert message == "'in' takes a non-empty list of values."
    assert isinstance(message, Text) and type(message[:4]) is str  # stored or sliced: plain English
    with translation.override("zh-hans"):
        assert localize(message) == "'in' 需要一个非空的值列表。"
        assert localize("Not found.") == "未找到。"
        assert localize("") == ""  # never the catalogue's header
    with translation.override("en"):
        assert localize(message) == "'in' takes a non-empty list of values."


def test_a_text_without_a_catalogue_entry_falls_back_to_its_english():
    text = Text("Nothing like this is in the catalogue: %(n)s.", n=3)
    with translation.override("zh-hans"):
        assert localize(text) == "Nothing like this is in the catalogue: 3."
