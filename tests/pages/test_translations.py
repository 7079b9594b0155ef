"""Simplified Chinese covers what users read: every failure cause's message (the pages show them
translated by cause), every entry of the catalogue, the storage quota's refusal, the search
filter's refusal and the default collection's name."""

from __future__ import annotations

import gettext
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import translation

from documents.models import Collection, Tenant
from jobs.errors import all_causes
from tests.pages.helpers import Member, html, ready

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


def _msgids(po: Path) -> set[tuple[str, str]]:
    """The catalogue's (context, msgid) pairs: live entries, written one per line (--no-wrap)."""
    pairs = set()
    for entry in _entries(po.read_text(encoding="utf-8")):
        context = re.search(r'^msgctxt "(.*)"$', entry, re.M)
        msgid = re.search(r'^msgid "(.*)"$', entry, re.M)
        assert msgid, entry
        pairs.add((context.group(1) if context else "", msgid.group(1)))
    return pairs


def test_every_string_marked_for_translation_is_in_the_chinese_catalogue(tmp_path: Path) -> None:
    """makemessages over the project's code and templates finds nothing the catalogue lacks, so a
    new English string that nobody translated fails here instead of reaching a Chinese reader."""
    base = Path(settings.BASE_DIR)
    for part in ("documents", "jobs", "templates", "config"):
        (tmp_path / part).symlink_to(base / part)
    fresh = tmp_path / "locale" / "zh_Hans" / "LC_MESSAGES"
    fresh.mkdir(parents=True)
    (fresh / "django.po").write_text(CATALOGUE.read_text(encoding="utf-8"), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(base), "DJANGO_SETTINGS_MODULE": "tests.settings"}
    subprocess.run(
        [sys.executable, str(base / "manage.py"), "makemessages", "-l", "zh_Hans", "--symlinks", "--no-wrap"],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
    )
    missing = _msgids(fresh / "django.po") - _msgids(CATALOGUE)
    assert missing == set()


def test_the_compiled_catalogue_matches_its_source(tmp_path: Path) -> None:
    """The .mo is committed beside the .po: both say the same (compilemessages after each edit)."""
    shipped = CATALOGUE.with_suffix(".mo")
    (tmp_path / "django.po").write_text(CATALOGUE.read_text(encoding="utf-8"), encoding="utf-8")
    subprocess.run(["msgfmt", "-o", str(tmp_path / "django.mo"), str(tmp_path / "django.po")], check=True)
    with shipped.open("rb") as a, (tmp_path / "django.mo").open("rb") as b:
        assert gettext.GNUTranslations(a)._catalog == gettext.GNUTranslations(b)._catalog  # type: ignore[attr-defined]


@pytest.mark.django_db(transaction=True)
def test_the_storage_quota_refusal_is_translated_on_the_page(alice: Member) -> None:
    Tenant.objects.filter(slug="acme").update(max_storage_bytes=10)
    upload = SimpleUploadedFile("notes.txt", b"Twenty-five bytes of text")
    response = alice.client.post("/", {"file": upload}, headers={"Accept-Language": "zh-hans"})
    assert response.status_code == 413
    assert "您的工作区已存储 0\xa0字节，上限为 10\xa0字节；此文件（25\xa0字节）放不下。" in html(response)  # noqa: RUF001 (Chinese punctuation)


@pytest.mark.django_db(transaction=True)
def test_a_bad_search_filter_is_refused_in_the_readers_language(alice: Member) -> None:
    ready(alice)
    unreadable = {"q": "harbor", "filters": "{bad"}
    page = html(alice.client.get("/search", unreadable, headers={"Accept-Language": "zh-hans"}))
    assert 'data-field="filter-error">必须是一个 JSON 对象。</p>' in page
    assert "Must be a JSON object." not in page
    # A message with a value in it: the value is kept, the words around it are translated.
    wrong_type = {"q": "harbor", "filters": '{"type": "near"}'}
    page = html(alice.client.get("/search", wrong_type, headers={"Accept-Language": "zh-hans"}))
    assert "必须是以下之一：eq, ne, gt, gte, lt, lte, in, nin, and, or。" in page  # noqa: RUF001
    english = html(alice.client.get("/search", unreadable))
    assert "Must be a JSON object." in english


@pytest.mark.django_db(transaction=True)
def test_the_default_collection_is_named_in_the_readers_language_and_stored_as_default(alice: Member) -> None:
    ready(alice)
    default = Collection.objects.get(tenant__slug="acme", is_default=True)
    chinese = {"Accept-Language": "zh-hans"}
    listing = html(alice.client.get("/collections/", headers=chinese))
    assert f'<a href="/collections/{default.pk}/">默认</a>' in listing
    page = html(alice.client.get(f"/collections/{default.pk}/", headers=chinese))
    assert "<h1>默认</h1>" in page
    upload_form = html(alice.client.get("/", headers=chinese))
    assert f'<option value="{default.pk}" selected>默认</option>' in upload_form
    assert ">Default<" not in listing + page + upload_form
    # Stored and found as before: programs (and English readers) still see "Default".
    assert Collection.objects.get(pk=default.pk).name == "Default"
    assert f'<a href="/collections/{default.pk}/">Default</a>' in html(alice.client.get("/collections/"))
    # A default collection given a name of its own keeps it, in every language.
    Collection.objects.filter(pk=default.pk).update(name="Harbor archive")
    assert "Harbor archive" in html(alice.client.get("/collections/", headers=chinese))
