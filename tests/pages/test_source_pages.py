"""The sources pages: the list, a source's page with its last sync (a progress line that reloads
itself while the sync runs, the counts and failed items afterwards), "sync now" for workspace
admins only; another workspace's source is a 404."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from documents.services.groups import membership_set_admin
from documents.sources.models import SourceSync
from tests.documents.helpers import run_until_idle
from tests.documents.source_helpers import folder_source, write
from tests.pages.helpers import Member

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def source(alice: Member, tmp_path: Path, settings: Any) -> Any:
    settings.SOURCES_ALLOWED_ROOTS = [str(tmp_path)]
    settings.MEDIA_ROOT = tmp_path / "media"
    write(tmp_path / "wiki", "a.txt", "Herons stand still for hours at the river.\n")
    (tmp_path / "wiki" / "empty.txt").write_bytes(b"")
    return folder_source(alice.tenant, tmp_path / "wiki")


def test_an_admin_syncs_now_and_follows_the_progress_line_to_the_counts(alice: Member, source: Any):
    user = get_user_model().objects.get(username=alice.username)
    membership_set_admin(membership=user.memberships.get(), is_admin=True)
    listing = alice.client.get("/sources/").content.decode()
    assert "Handbook" in listing and "Never synced" in listing
    page = alice.client.get(f"/sources/{source.pk}/").content.decode()
    assert "Sync now" in page and 'http-equiv="refresh"' not in page
    assert alice.client.post(f"/sources/{source.pk}/sync").status_code == 303
    running = alice.client.get(f"/sources/{source.pk}/").content.decode()
    assert 'http-equiv="refresh"' in running and "state-queued" in running
    # The script follows the stream; only a page without scripts reloads itself.
    assert f'data-events="/api/sources/{source.pk}/events"' in running and "source_live.js" in running
    assert '<noscript><meta http-equiv="refresh"' in running
    run_until_idle(SourceSync.objects.get(source=source).job_id)
    done = alice.client.get(f"/sources/{source.pk}/").content.decode()
    assert 'http-equiv="refresh"' not in done and "state-ready" in done
    assert '<dt>new</dt><dd data-count="new">2</dd>' in done
    assert '<dt>failed</dt><dd data-count="failed">1</dd>' in done
    assert "source_live.js" not in done
    assert "empty.txt" in done and "file_empty" in done


def test_a_member_sees_no_sync_button_and_cannot_sync(alice: Member, source: Any):
    page = alice.client.get(f"/sources/{source.pk}/").content.decode()
    assert "Sync now" not in page
    assert alice.client.post(f"/sources/{source.pk}/sync").status_code == 404
    assert not SourceSync.objects.exists()


def test_another_workspaces_source_is_not_found(bob: Member, source: Any):
    assert bob.client.get(f"/sources/{source.pk}/").status_code == 404
    assert "Handbook" not in bob.client.get("/sources/").content.decode()


def test_a_cron_schedule_and_its_next_run_are_on_the_page(alice: Member, source: Any):
    from documents.sources.schedules import next_run
    from documents.sources.services import source_update

    source = source_update(source=source, schedule_cron="0 3 * * 1-5")
    page = alice.client.get(f"/sources/{source.pk}/").content.decode()
    upcoming = next_run(source)
    assert upcoming is not None and (upcoming.hour, upcoming.minute) == (3, 0)
    assert "<code>0 3 * * 1-5</code>" in page
    assert f"<dd>{upcoming:%Y-%m-%d %H:%M}</dd>" in page


def test_bucket_and_site_sources_show_where_their_items_come_from(alice: Member, source: Any):
    from documents.sources.models import Source

    bucket = Source.objects.create(
        tenant=alice.tenant,
        collection=source.collection,
        kind=Source.Kind.S3,
        name="Policies",
        config={
            "endpoint": "https://s3.example.com",
            "region": "eu-west-1",
            "bucket": "policies",
            "prefix": "hr/",
        },
    )
    site = Source.objects.create(
        tenant=alice.tenant,
        collection=source.collection,
        kind=Source.Kind.WEB,
        name="Handbook site",
        config={"start_urls": ["https://handbook.example.com/docs/"], "max_depth": 2, "page_limit": 50},
    )
    listed = alice.client.get("/sources/").content.decode()
    for where in (
        str(source.config["path"]),
        "s3://policies/hr/ (https://s3.example.com)",
        "https://handbook.example.com/docs/",
    ):
        assert where in listed
    assert "s3://policies/hr/" in alice.client.get(f"/sources/{bucket.pk}/").content.decode()
    page = alice.client.get(f"/sources/{site.pk}/").content.decode()
    assert "https://handbook.example.com/docs/" in page and "Web site" in page
