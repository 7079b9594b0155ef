"""The job page: read-only fields, every attempt with its operator-only detail, the full event
history, the checkpoint, links to the document and version, and buttons for exactly the actions
that apply (each going through the same confirmation and service)."""

from __future__ import annotations

import pytest
from django.test import Client

from jobs.models import JobEvent
from jobs.services.worker import job_report_progress
from tests.jobs import helpers as jh
from tests.ops.helpers import (
    JOBS,
    advance_to,
    confirm,
    document_job,
    fail,
    job_url,
    messages_of,
    offered_on_page,
    page_action_fields,
    stalled,
)

pytestmark = pytest.mark.django_db


def test_the_page_shows_attempts_with_the_operator_only_error_detail(viewer):
    claim = advance_to(document_job(), "ocr", worker="ocr-host:12")
    job = fail(claim, "corrupt_input", "page 3: bad xref at offset 1234")
    html = viewer.get(job_url(job)).content.decode()
    attempts = html[html.index('id="jobs-attempts"') :]
    assert "ocr-host:12" in attempts and "parsing" in attempts and "advanced" in attempts
    assert "corrupt_input" in attempts and "jobs.errors.StageFailure" in attempts
    assert "page 3: bad xref at offset 1234" in attempts
    assert "Traceback (most recent call last)" in attempts and "<details>" in attempts
    assert claim.token[:8] in attempts


def test_the_page_shows_the_full_history_with_who_when_from_to_and_reason(senior: Client) -> None:
    job = stalled(worker="host-a:1")
    page = senior.get(job_url(job))
    fields = page_action_fields(page.content.decode(), "take_over")
    assert fields is not None
    data: dict[str, list[str]] = {}
    for key, value in fields:
        data.setdefault(key, []).append(value)
    confirmation = senior.post(JOBS, data)
    done = confirm(senior, confirmation, reason="host-a decommissioned")
    assert done.redirect_chain[-1][0] == job_url(job)
    html = done.content.decode()
    history = html[html.index('id="jobs-history"') :]
    for expected in (
        "enqueue",
        "claim",
        "mark_stalled",
        "take_over",
        "reaper",
        "operator: sam",
        "host-a decommissioned",
        "lease of host-a:1 expired",
        "stalled",
        "queued",
    ):
        assert expected in history, expected
    assert "1 job taken over" in " ".join(messages_of(done))


def test_progress_events_are_folded_away_until_asked_for(viewer):
    claim = jh.running()
    job_report_progress(job_id=claim.job_id, token=claim.token, done=1, total=2)
    assert JobEvent.objects.filter(job_id=claim.job_id, kind="progress").count() == 1
    folded = viewer.get(job_url(claim.job)).content.decode()
    assert "Show the 1 progress events too" in folded
    assert ">progress 1/2<" not in folded.replace("\n", "")
    unfolded = viewer.get(job_url(claim.job) + "?events=all").content.decode()
    assert "progress 1/2" in unfolded


def test_the_page_links_to_the_document_and_its_version(senior, admin_client: Client):
    job = document_job()
    version_id = job.payload["version_id"]
    html = senior.get(job_url(job)).content.decode()
    document_url = f"/admin/documents/document/{job.subject_id}/change/"
    version_url = f"/admin/documents/documentversion/{version_id}/change/"
    assert f'href="{document_url}"' in html and f'href="{version_url}"' in html
    assert admin_client.get(document_url).status_code == 200
    version_page = admin_client.get(version_url).content.decode()
    assert f'href="{job_url(job)}"' in version_page  # and back


def test_the_page_shows_the_checkpoint(viewer):
    from jobs.services.worker import job_save_checkpoint

    claim = jh.running()
    job_save_checkpoint(job_id=claim.job_id, token=claim.token, checkpoint={"next": 3})
    html = viewer.get(job_url(claim.job)).content.decode()
    assert "&quot;next&quot;: 3" in html[html.index('id="jobs-checkpoint"') :]


def test_buttons_are_offered_only_where_the_state_and_the_permissions_allow(viewer, operator, senior):
    job = stalled()
    assert offered_on_page(senior.get(job_url(job)).content.decode()) == {"take_over", "give_up"}
    assert offered_on_page(operator.get(job_url(job)).content.decode()) == {"give_up"}
    page = viewer.get(job_url(job)).content.decode()
    assert offered_on_page(page) == set() and "lack the permission" in page
    finished = jh.reload(jh.new_job())
    finished_page = senior.get(job_url(finished)).content.decode()
    assert offered_on_page(finished_page) == {"cancel"}


def test_the_header_counts_status_changes_and_the_subject_names_the_document_version(viewer):
    job = document_job()
    html = viewer.get(job_url(job)).content.decode()
    summary = html[html.index('class="jobs-summary"') : html.index("Operator actions")]
    assert f"{job.version} status change" in summary
    assert "version v" not in summary
    assert ">document version 1</a>" in summary
    assert "status changes" in html  # the read-only field, not "version"
