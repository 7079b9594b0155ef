"""Simplified Chinese covers what users read: every failure cause's message (the pages show them
translated by cause), every entry of the catalogue, and the storage quota's refusal."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import translation

from documents.models import Tenant
from jobs.errors import all_causes
from tests.pages.helpers import Member, html

CATALOGUE = Path(settings.BASE_DIR) / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"


def test_every_cause_message_has_a_chinese_translation() -> None:
    causes = all_causes()
    assert {"parse_timeout", "resource_limit", "too_many_pages", "line_too_long"} <= {c.code for c in causes}
    with translation.override("zh-hans"):
        untranslated = [c.code for c in causes if translation.gettext(c.user_message) == c.user_message]
    assert untranslated == []


def _entries(text: str) -> list[str]:
    """The catalogue's live entries (no header, no obsolete ``#~`` ones)."""
    blocks = [b for b in text.split("\n\n") if "msgid " in b and not b.lstrip().startswith("#~")]
    return [b for b in blocks if not re.search(r'^msgid ""\nmsgstr ""\n"Project-Id', b, re.M)]


def test_the_chinese_catalogue_has_no_empty_or_fuzzy_entry() -> None:
    entries = _entries(CATALOGUE.read_text(encoding="utf-8"))
    assert len(entries) > 100
    empty = [b for b in entries if re.search(r'^msgstr(\[0\])? ""$', b, re.M)]
    fuzzy = [b for b in entries if re.search(r"^#,.*\bfuzzy\b", b, re.M)]
    assert empty == [] and fuzzy == []


@pytest.mark.django_db(transaction=True)
def test_the_storage_quota_refusal_is_translated_on_the_page(alice: Member) -> None:
    Tenant.objects.filter(slug="acme").update(max_storage_bytes=10)
    upload = SimpleUploadedFile("notes.txt", b"Twenty-five bytes of text")
    response = alice.client.post("/", {"file": upload}, headers={"Accept-Language": "zh-hans"})
    assert response.status_code == 413
    assert "您的工作区已存储 0\xa0字节，上限为 10\xa0字节；此文件（25\xa0字节）放不下。" in html(response)  # noqa: RUF001 (Chinese punctuation)
