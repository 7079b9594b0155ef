"""English and Simplified Chinese: chosen from the browser, switchable, codes kept in the API."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.pages.helpers import Member, detail_url, failed_reupload, html, job_id_of, running

pytestmark = pytest.mark.django_db(transaction=True)
CHINESE = {"Accept-Language": "zh-hans"}


def test_a_chinese_browser_gets_translated_states_stages_counts_and_actions(alice: Member):
    result, _claim = running(alice, done=130, total=200)
    body = html(alice.client.get(detail_url(result), headers=CHINESE))
    assert '<html lang="zh-hans">' in body
    for stage in ("解析", "文字识别", "分块", "向量化", "索引"):
        assert f'<span class="step-name">{stage}</span>' in body
    assert '<span class="step-state">进行中</span>' in body
    assert '<span class="badge state-parsing" data-field="state">解析中</span>' in body
    assert "第 1 / 5 步 · 解析" in body
    assert "第 130 / 200 页" in body
    assert "取消处理" in body
    assert "重试" in body
    assert "Cancel processing" not in body
    # The live script gets the same words, in Chinese.
    assert '"cancel_requested": "\\u6b63\\u5728\\u505c\\u6b62\\u2026"' in body  # 正在停止…


def test_a_failure_message_and_its_action_are_translated_by_cause(alice: Member):
    result = failed_reupload(alice)
    body = html(alice.client.get(detail_url(result), headers=CHINESE))
    assert "解析失败" in body
    assert "文件受密码保护。请移除密码后重新上传。" in body
    assert "上传修正后的文件副本。" in body
    assert "password-protected" not in body.split('<script id="job-status"')[0]


def test_upload_refusals_are_translated(alice: Member):
    response = alice.client.post("/", {"file": SimpleUploadedFile("e.pdf", b"")}, headers=CHINESE)
    assert response.status_code == 400
    assert "文件是空的。" in html(response)


def test_the_language_can_be_switched_on_the_page(alice: Member):
    page = html(alice.client.get("/"))
    assert '<form class="language" action="/i18n/setlang/" method="post">' in page
    switched = alice.client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    assert switched.status_code == 302
    body = html(alice.client.get("/"))
    assert '<html lang="zh-hans">' in body
    assert "上传文档" in body
    alice.client.post("/i18n/setlang/", {"language": "en", "next": "/"})
    assert "Upload a document" in html(alice.client.get("/"))


def test_the_api_keeps_english_codes_for_a_chinese_browser(alice: Member):
    result, _claim = running(alice)
    status = alice.client.get(
        f"/api/documents/{result.document.pk}/jobs/{job_id_of(result)}", headers=CHINESE
    ).json()
    assert status["state"] == "parsing"
    assert status["stage_label"] == "Parsing"
    assert status["stages"][0]["state"] == "running"
