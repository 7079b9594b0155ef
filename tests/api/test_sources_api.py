"""``/api/sources``: create, read, change and remove folder sources, their refusals (a path
outside the allowed roots, a symlink leading out of them, a missing folder), "sync now" and
where a source stands after a sync; two concurrent "sync now" calls make one sync (PostgreSQL,
real threads)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from documents.kinds import INGEST
from documents.services.collections import default_collection
from documents.services.groups import membership_set_admin
from documents.sources.models import Source, SourceSync
from jobs.models import Job, Status
from tests.api.conftest import Caller, assert_error, drive
from tests.conftest import race

pytestmark = pytest.mark.django_db


@pytest.fixture
def allowed(tmp_path: Path, settings: Any) -> Path:
    root = tmp_path / "allowed"
    (root / "handbook").mkdir(parents=True)
    (root / "handbook" / "a.txt").write_text("Alpacas graze on the terraced hills of the estate.\n")
    (root / "handbook" / "b.md").write_text("# Bees\n\nThe apiary keeps forty hives of mountain bees.\n")
    settings.SOURCES_ALLOWED_ROOTS = [str(root)]
    return root


def make_admin(caller: Caller) -> None:
    user = get_user_model().objects.get(username=caller.username)
    membership_set_admin(membership=user.memberships.get(), is_admin=True)


def collection_id(caller: Caller) -> str:
    from documents.models import Tenant

    return str(default_collection(Tenant.objects.get(slug=caller.tenant)).pk)


def create(caller: Caller, path: Path | str, **extra: Any) -> Any:
    body = {"name": "Handbook", "collection": collection_id(caller), "config": {"path": str(path)}, **extra}
    return caller.client.post("/api/sources", body, format="json")


def test_an_admin_creates_lists_changes_and_removes_a_folder_source(alice, allowed):
    make_admin(alice)
    response = create(alice, allowed / "handbook", schedule_minutes=30, on_removal="keep")
    assert response.status_code == 201, response.content
    source = response.json()
    assert source["config"] == {"path": str(allowed / "handbook")}
    assert (source["kind"], source["on_removal"], source["schedule_minutes"]) == ("folder", "keep", 30)
    assert source["last_sync"] is None and source["next_sync_at"] is not None
    assert [s["id"] for s in alice.client.get("/api/sources").json()] == [source["id"]]
    changed = alice.client.patch(f"/api/sources/{source['id']}", {"schedule_minutes": None}, format="json")
    assert changed.status_code == 200 and changed.json()["next_sync_at"] is None
    assert alice.client.delete(f"/api/sources/{source['id']}").status_code == 204
    assert_error(alice.client.get(f"/api/sources/{source['id']}"), 404, "not_found")


def test_a_kind_without_secrets_refuses_credentials_and_an_unknown_kind_is_a_400(alice, allowed):
    make_admin(alice)
    response = create(alice, allowed / "handbook", credentials={"token": "s3cr3t-value"})
    assert_error(response, 400, "invalid_credentials")
    assert "s3cr3t-value" not in response.content.decode()
    assert_error(create(alice, allowed / "handbook", kind="gopher"), 400, "invalid")
    assert not Source.objects.exists()
    made = create(alice, allowed / "handbook").json()
    assert made["has_credentials"] is False and "credentials" not in made


def test_a_member_reads_sources_but_only_an_admin_manages_them(alice, make_caller, allowed):
    make_admin(alice)
    source = create(alice, allowed / "handbook").json()
    bob = make_caller("bob", "acme")
    assert bob.client.get(f"/api/sources/{source['id']}").status_code == 200
    assert_error(create(bob, allowed / "handbook"), 403, "permission_denied")
    assert_error(bob.client.post(f"/api/sources/{source['id']}/sync"), 403, "permission_denied")
    assert_error(bob.client.delete(f"/api/sources/{source['id']}"), 403, "permission_denied")


def test_another_workspaces_source_is_not_found(alice, mallory, allowed):
    make_admin(alice)
    make_admin(mallory)
    source = create(alice, allowed / "handbook").json()
    assert_error(mallory.client.get(f"/api/sources/{source['id']}"), 404, "not_found")
    assert_error(mallory.client.post(f"/api/sources/{source['id']}/sync"), 404, "not_found")


def _no_server_path(response: Any, *paths: Path) -> None:
    for path in paths:
        assert str(path) not in response.content.decode()


def test_a_folder_outside_the_allowed_roots_is_refused_without_naming_them(alice, allowed, tmp_path):
    make_admin(alice)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    response = create(alice, elsewhere)
    error = assert_error(response, 400, "path_not_allowed")
    assert error["detail"] == {"field": "path"}
    _no_server_path(response, elsewhere, allowed)
    assert not Source.objects.exists()


def test_a_symlink_leading_out_of_the_allowed_roots_is_refused(alice, allowed, tmp_path):
    make_admin(alice)
    secret = tmp_path / "secret"
    secret.mkdir()
    (allowed / "escape").symlink_to(secret, target_is_directory=True)
    response = create(alice, allowed / "escape")
    assert_error(response, 400, "path_not_allowed")
    _no_server_path(response, secret)
    # A path with ".." that resolves out of the root is the same folder outside it.
    assert_error(create(alice, f"{allowed}/../secret"), 400, "path_not_allowed")


def test_a_missing_folder_a_relative_path_and_disabled_sources_are_clear_400s(alice, allowed, settings):
    make_admin(alice)
    assert_error(create(alice, allowed / "nowhere"), 400, "folder_not_found")
    assert_error(create(alice, "handbook"), 400, "invalid_path")
    assert_error(create(alice, allowed / "handbook" / "a.txt"), 400, "not_a_folder")
    settings.SOURCES_ALLOWED_ROOTS = []
    assert_error(create(alice, allowed / "handbook"), 400, "sources_disabled")


def test_sync_now_answers_the_running_sync_and_the_source_shows_where_it_stands(alice, allowed):
    make_admin(alice)
    source = create(alice, allowed / "handbook").json()
    (allowed / "handbook" / "empty.txt").write_bytes(b"")
    first = alice.client.post(f"/api/sources/{source['id']}/sync")
    assert first.status_code == 202, first.content
    again = alice.client.post(f"/api/sources/{source['id']}/sync")
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    assert drive(first.json()["job_id"]).status == Status.READY
    for job_id in Job.objects.filter(kind=INGEST).values_list("pk", flat=True):
        assert drive(job_id).status == Status.READY
    shown = alice.client.get(f"/api/sources/{source['id']}").json()["last_sync"]
    assert shown["state"] == "ready" and shown["duration_seconds"] is not None
    assert shown["started_at"] and shown["finished_at"]
    assert shown["counts"] == {"found": 3, "new": 3, "changed": 0, "removed": 0, "unchanged": 0, "failed": 1}
    assert shown["failures"] == [{"key": "empty.txt", "code": "file_empty", "message": "The file is empty."}]
    batch = alice.client.get(f"/api/batches/{shown['batch_id']}").json()
    assert batch["file_counts"]["ready"] == 2 and batch["file_counts"]["rejected"] == 1
    # Another sync now starts a new one: the last one finished.
    assert alice.client.post(f"/api/sources/{source['id']}/sync").status_code == 202


def test_sync_now_refuses_a_folder_that_is_no_longer_allowed(alice, allowed, settings, tmp_path):
    make_admin(alice)
    source = create(alice, allowed / "handbook").json()
    settings.SOURCES_ALLOWED_ROOTS = [str(tmp_path / "another")]
    assert_error(alice.client.post(f"/api/sources/{source['id']}/sync"), 400, "path_not_allowed")
    assert not SourceSync.objects.exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_concurrent_sync_now_calls_make_one_sync(alice, allowed):
    make_admin(alice)
    source = create(alice, allowed / "handbook").json()
    url = f"/api/sources/{source['id']}/sync"

    def call() -> tuple[int, str]:
        from tests.api.conftest import token_client

        response = token_client(alice.token).post(url)
        return response.status_code, json.loads(response.content)["id"]

    for _ in range(3):
        results = race([call for _ in range(6)])
        assert all(isinstance(r, tuple) for r in results), results
        assert sorted(code for code, _ in results) == [200] * 5 + [202]
        assert len({sync_id for _, sync_id in results}) == 1
        assert SourceSync.objects.filter(finished_at=None).count() == 1
        drive(SourceSync.objects.get(finished_at=None).job_id)
    assert SourceSync.objects.count() == 3


def _cron_row(source_id: str) -> Any:
    from django_q.models import Schedule

    from documents.sources.schedules import schedule_name

    return Schedule.objects.filter(name=schedule_name(source_id)).first()


def _next_times(expression: str) -> set[Any]:
    """The cron's next time as of now (and a moment later: the minute may turn meanwhile)."""
    from datetime import datetime, timedelta

    from croniter import croniter
    from django.utils import timezone

    now = timezone.localtime()
    return {croniter(expression, at).get_next(datetime) for at in (now - timedelta(seconds=5), now)}


def test_a_cron_schedule_is_a_q2_cron_schedule_changed_and_removed_with_the_source(alice, allowed):
    from django_q.models import Schedule

    make_admin(alice)
    before = _next_times("0 3 * * 1-5")
    response = create(alice, allowed / "handbook", schedule_cron="0 3  * * 1-5")
    assert response.status_code == 201, response.content
    source = response.json()
    assert (source["schedule_cron"], source["schedule_minutes"]) == ("0 3 * * 1-5", None)
    row = _cron_row(source["id"])
    assert (row.schedule_type, row.cron, row.func) == (
        Schedule.CRON,
        "0 3 * * 1-5",
        "documents.sources.tasks.sync_scheduled",
    )
    assert row.next_run in before | _next_times("0 3 * * 1-5")
    assert source["next_sync_at"] == row.next_run.isoformat()

    url = f"/api/sources/{source['id']}"
    changed = alice.client.patch(url, {"schedule_cron": "30 22 1 * *"}, format="json")
    assert changed.status_code == 200, changed.content
    row = _cron_row(source["id"])
    assert row.cron == "30 22 1 * *" and row.next_run in _next_times("30 22 1 * *")
    # To minutes: the cron is cleared in the same change; the row becomes a MINUTES one.
    to_minutes = alice.client.patch(url, {"schedule_cron": "", "schedule_minutes": 45}, format="json")
    assert to_minutes.status_code == 200, to_minutes.content
    row = _cron_row(source["id"])
    assert (row.schedule_type, row.minutes, row.cron) == (Schedule.MINUTES, 45, None)
    back = alice.client.patch(url, {"schedule_cron": "*/10 * * * *", "schedule_minutes": None}, format="json")
    assert back.status_code == 200 and _cron_row(source["id"]).schedule_type == Schedule.CRON
    removed = alice.client.patch(url, {"schedule_cron": None}, format="json")
    assert removed.status_code == 200 and removed.json()["next_sync_at"] is None
    assert _cron_row(source["id"]) is None
    assert Source.objects.get(pk=source["id"]).schedule_cron == ""


def test_a_bad_cron_or_both_schedules_are_a_400_naming_the_field(alice, allowed):
    make_admin(alice)
    for bad in ("0 3 * *", "61 * * * *", "every day", "0 3 * * * *", "@daily", 5):
        error = assert_error(create(alice, allowed / "handbook", schedule_cron=bad), 400, "invalid_schedule")
        assert error["detail"] == {"field": "schedule_cron"}, (bad, error)
    both = create(alice, allowed / "handbook", schedule_cron="0 3 * * *", schedule_minutes=60)
    assert assert_error(both, 400, "invalid_schedule")["detail"] == {"field": "schedule_cron"}
    assert not Source.objects.exists()
    source = create(alice, allowed / "handbook", schedule_minutes=60).json()
    # Adding a cron while minutes are set: refused, nothing changed.
    refused = alice.client.patch(
        f"/api/sources/{source['id']}", {"schedule_cron": "0 3 * * *"}, format="json"
    )
    assert assert_error(refused, 400, "invalid_schedule")["detail"] == {"field": "schedule_cron"}
    assert _cron_row(source["id"]).minutes == 60
    assert Source.objects.get(pk=source["id"]).schedule_cron == ""
