"""The document page's "Process again" (a cancelled or failed version's stored file, processed
anew as the next version) and Cancel's confirmation step, without JavaScript (test client)."""

from __future__ import annotations

import re

import pytest

from documents.models import DocumentVersion
from jobs.models import Status
from jobs.services.lifecycle import job_cancel
from tests.pages.helpers import (
    Member,
    detail_url,
    failed_retryable,
    failed_reupload,
    html,
    job,
    job_id_of,
    job_url,
    queued,
    ready,
    running,
)
from tests.pages.test_document import hidden

pytestmark = pytest.mark.django_db(transaction=True)


def _again_url(result: object, number: int = 1) -> str:
    return f"{detail_url(result)}versions/{number}/process-again"  # type: ignore[arg-type]


def test_a_cancelled_version_offers_process_again_with_what_it_reuses(alice: Member):
    result = queued(alice)
    job_cancel(job_id=job_id_of(result))
    body = html(alice.client.get(detail_url(result)))
    assert not hidden(body, 'data-action="process_again"')
    form = re.search(
        r'<form method="post" action="([^"]+)" data-action="process_again".*?</form>', body, re.S
    )
    assert form is not None and form.group(1) == _again_url(result)
    assert 'name="csrfmiddlewaretoken"' in form.group(0)
    assert "Uses the file you uploaded; processing starts over as a new version." in form.group(0)

    response = alice.client.post(_again_url(result))

    assert response.status_code == 303 and response["Location"] == detail_url(result)
    versions = DocumentVersion.objects.filter(document_id=result.document.pk).order_by("number")
    assert [v.number for v in versions] == [1, 2]
    assert versions[1].job is not None and versions[1].job.status == Status.QUEUED
    assert job(result).status == Status.CANCELLED  # history stays
    page = html(alice.client.get(detail_url(result)))
    assert "Processing again as version 2, from the file you uploaded." in page
    assert hidden(page, 'data-action="process_again"')  # the latest version is queued now
    assert not hidden(page, 'data-action="cancel"')


def test_a_failed_version_offers_process_again(alice: Member):
    result = failed_retryable(alice)
    body = html(alice.client.get(detail_url(result)))
    assert not hidden(body, 'data-action="process_again"')


def test_a_failure_only_new_bytes_fix_offers_only_the_corrected_copy(alice: Member):
    result = failed_reupload(alice)  # encrypted_input: the same file fails the same way
    body = html(alice.client.get(detail_url(result)))
    assert hidden(body, 'data-action="process_again"')
    assert not hidden(body, 'data-field="reupload"')
    response = alice.client.post(_again_url(result), follow=True)
    assert "Processing the same file again would fail the same way." in html(response)
    assert DocumentVersion.objects.filter(document_id=result.document.pk).count() == 1


@pytest.mark.parametrize("make", [queued, ready])
def test_no_process_again_for_a_queued_or_ready_version_and_a_forced_post_is_explained(alice: Member, make):
    result = make(alice)
    assert hidden(html(alice.client.get(detail_url(result))), 'data-action="process_again"')
    response = alice.client.post(_again_url(result), follow=True)
    assert response.status_code == 200
    assert "Only a cancelled or failed version can be processed again" in html(response)
    assert DocumentVersion.objects.filter(document_id=result.document.pk).count() == 1


def test_another_tenants_version_is_not_found(alice: Member, bob: Member):
    result = queued(bob)
    job_cancel(job_id=job_id_of(result))
    assert alice.client.post(_again_url(result)).status_code == 404


def test_cancel_without_javascript_asks_on_a_page_first(alice: Member):
    result, _claim = running(alice)
    asked = alice.client.post(job_url(result, "cancel"))
    assert asked.status_code == 200
    page = html(asked)
    assert "Stop processing?" in page
    assert 'name="confirm" value="yes"' in page and 'name="csrfmiddlewaretoken"' in page
    assert job(result).status == Status.RUNNING  # nothing happened yet
    done = alice.client.post(job_url(result, "cancel"), {"confirm": "yes"})
    assert done.status_code == 303
    assert job(result).status == Status.CANCEL_REQUESTED


def test_the_card_carries_the_in_page_question_for_the_script(alice: Member):
    result, _claim = running(alice)
    body = html(alice.client.get(detail_url(result)))
    assert hidden(body, 'data-field="confirm-cancel"')
    assert 'name="confirm" value="yes" data-step="confirm"' in body
