"""``GET /api/sources/{id}/events``: the source page's live line. Only members of the source's
workspace may open it; it sends the last sync as the source endpoint shows it and ends once the
sync finished."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.utils import translation

from documents.models import Tenant
from documents.sources.models import SourceItem
from documents.sources.services import sync_start
from jobs.models import Job
from tests.api.conftest import Caller
from tests.api.test_sse_race import read_stream
from tests.documents.helpers import run_until_idle
from tests.documents.source_helpers import folder_source, write

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def source(alice: Caller, tmp_path: Path, settings: Any) -> Any:
    settings.SOURCES_ALLOWED_ROOTS = [str(tmp_path)]
    settings.MEDIA_ROOT = tmp_path / "media"
    write(tmp_path / "wiki", "a.txt", "Herons stand still for hours at the river.\n")
    return folder_source(Tenant.objects.get(slug=alice.tenant), tmp_path / "wiki")


def syncs_in(raw: bytes) -> list[dict[str, Any]]:
    out = []
    for block in raw.decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":"))
        if lines.get("event") == "sync":
            out.append(json.loads(lines["data"]))
    return out


def test_a_member_follows_a_running_sync_and_the_stream_ends_after_it_finished(alice: Caller, source: Any):
    url = f"/api/sources/{source.pk}/events"
    job_id = sync_start(source=source).sync.job_id
    raw, ended = async_to_sync(read_stream)(alice.token, url, None, 1.5)
    assert not ended  # still queued: the stream stays open
    assert [s["state"] for s in syncs_in(raw)] == ["queued"]
    run_until_idle(job_id)
    raw, ended = async_to_sync(read_stream)(alice.token, url, None, 10)
    assert ended
    (done,) = syncs_in(raw)
    assert done["state"] == "ready" and done["counts"]["new"] == 1


def test_the_stream_says_each_failure_in_the_language_of_its_request(
    alice: Caller, source: Any, tmp_path: Path
):
    """The page draws the failures as the stream says them: in its reader's language, as the page
    itself would (the stored words are the causes' English ones)."""
    url = f"/api/sources/{source.pk}/events"
    (tmp_path / "wiki" / "empty.txt").write_bytes(b"")
    run_until_idle(sync_start(source=source).sync.job_id)
    stored = SourceItem.objects.get(key="empty.txt").error_message
    with translation.override("zh-hans"):
        chinese = translation.gettext(stored)
    assert chinese != stored
    raw, ended = async_to_sync(read_stream)(alice.token, url, None, 10, "zh-hans")
    assert ended
    (done,) = syncs_in(raw)
    assert done["failures"] == [{"key": "empty.txt", "code": "file_empty", "message": chinese}]
    raw, _ = async_to_sync(read_stream)(alice.token, url, None, 10, "en")
    assert syncs_in(raw)[0]["failures"][0]["message"] == stored

    # A sync that fails as a whole: its cause's words, in the reader's language too.
    job_id = sync_start(source=source).sync.job_id
    shutil.rmtree(tmp_path / "wiki")
    job = run_until_idle(job_id)
    assert job.status == "failed" and Job.objects.get(pk=job_id).error_message
    with translation.override("zh-hans"):
        cause = translation.gettext(job.error_message)
    assert cause != job.error_message
    raw, _ = async_to_sync(read_stream)(alice.token, url, None, 10, "zh-hans")
    assert syncs_in(raw)[0]["error"] == {"code": job.error_code, "message": cause}


def test_only_members_of_the_sources_workspace_may_open_it(
    alice: Caller, mallory: Caller, source: Any, client: Any
):
    url = f"/api/sources/{source.pk}/events"
    sync_start(source=source)
    other = async_to_sync(_status)(mallory.token, url)
    assert other == (404, "not_found")
    assert async_to_sync(_status)(None, url) == (401, "not_authenticated")
    assert async_to_sync(_status)(None, "/api/sources/not-a-source/events") == (401, "not_authenticated")
    assert async_to_sync(_status)(alice.token, "/api/sources/not-a-source/events") == (404, "not_found")


async def _status(token: str | None, url: str) -> tuple[int, str]:
    from django.test import AsyncClient

    headers = {"Authorization": f"Token {token}"} if token else {}
    response: Any = await AsyncClient().get(url, headers=headers)
    return response.status_code, json.loads(response.content)["error"]["code"]
