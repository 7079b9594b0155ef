"""Operators see every workspace's sources with their last sync in the admin, and start a sync
from the list ("sync now": a running sync is left alone); only with the change permission."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from documents.sources.models import SourceSync
from tests.documents.source_helpers import folder_source, sync_job, write
from tests.ops.conftest import login, make_staff
from tests.ops.helpers import tenant

pytestmark = pytest.mark.django_db

LIST = "/admin/documents/source/"


@pytest.fixture
def source(tmp_path: Path, settings: Any) -> Any:
    settings.SOURCES_ALLOWED_ROOTS = [str(tmp_path)]
    write(tmp_path / "wiki", "a.txt", "Otters hold hands while they sleep.\n")
    return folder_source(tenant(), tmp_path / "wiki")


def sync_now(client: Any, source: Any) -> Any:
    return client.post(LIST, {"action": "sync_now", "_selected_action": [str(source.pk)]}, follow=True)


def test_the_list_shows_the_last_sync_and_sync_now_starts_one_once(source):
    client = login(make_staff("cora", "view_source", "change_source", app="documents"))
    sync_job(source)
    page = client.get(LIST)
    assert page.status_code == 200
    assert b"Handbook" in page.content and b"found 1" in page.content and b"ready" in page.content
    assert b"Started 1 sync(s); 0 already running." in sync_now(client, source).content
    assert b"Started 0 sync(s); 1 already running." in sync_now(client, source).content
    assert SourceSync.objects.filter(source=source).count() == 2
    detail = client.get(f"{LIST}{source.pk}/change/")
    assert detail.status_code == 200 and b"Handbook" in detail.content


def test_staff_who_may_only_view_cannot_sync(source):
    client = login(make_staff("vera", "view_source", app="documents"))
    assert client.get(LIST).status_code == 200
    sync_now(client, source)
    assert not SourceSync.objects.filter(source=source).exists()
