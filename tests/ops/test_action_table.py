"""Every (status, action) pair, asked of every face: the table of ``jobs/rules.py``, the service,
the admin, the status JSON, the document page's buttons and the API must give one answer.

Each pair is walked on real document jobs made through the services: the read-only faces on one
job, the API on the same job (it may change it), and the service on a second, fresh job.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from documents.api.output import job_status
from jobs import rules
from jobs.admin.actions import get_action
from jobs.errors import TransitionRefused
from jobs.models import Actor, Job
from jobs.services.lifecycle import job_cancel, job_give_up, job_retry, job_take_over
from jobs.services.transition import apply_transition
from tests.pages import helpers as ph

pytestmark = pytest.mark.django_db(transaction=True)


def _stalled(member: ph.Member) -> ph.UploadResult:
    result, claim = ph.running(member)
    job = Job.objects.get(pk=claim.job_id)
    apply_transition(job, "mark_stalled", actor=Actor.REAPER, now=timezone.now() + timedelta(hours=1))
    return result


def _cancel_requested(member: ph.Member) -> ph.UploadResult:
    result, _claim = ph.running(member)
    job_cancel(job_id=ph.job_id_of(result), actor_name="setup")
    return result


def _cancelled(member: ph.Member) -> ph.UploadResult:
    result = ph.queued(member)
    job_cancel(job_id=ph.job_id_of(result), actor_name="setup")
    return result


STATES: dict[str, Callable[[ph.Member], ph.UploadResult]] = {
    "queued": ph.queued,
    "running": lambda member: ph.running(member)[0],
    "cancel_requested": _cancel_requested,
    "stalled": _stalled,
    "failed_retryable": ph.failed_retryable,
    "failed_permanent": ph.failed_reupload,
    "ready": ph.ready,
    "cancelled": _cancelled,
}

SERVICES: dict[str, Callable[[Any], Job]] = {
    "cancel": lambda pk: job_cancel(job_id=pk, actor_name="face"),
    "retry": lambda pk: job_retry(job_id=pk, actor_name="face"),
    "force_retry": lambda pk: job_retry(job_id=pk, actor_name="face", force=True),
    "take_over": lambda pk: job_take_over(job_id=pk, actor_name="face"),
    "give_up": lambda pk: job_give_up(job_id=pk, actor_name="face"),
}
USER_ACTIONS = {"cancel": "can_cancel", "retry": "can_retry"}


@pytest.fixture
def member(transactional_db: None) -> ph.Member:
    return ph.make_member("face-user", "faces")


@pytest.mark.parametrize("action", list(SERVICES))
@pytest.mark.parametrize("state", list(STATES))
def test_every_face_gives_the_tables_answer(member: ph.Member, state: str, action: str):
    result = STATES[state](member)
    job = ph.job(result)
    why = rules.refusal(action, job)

    # The admin offers the action exactly where the table allows it, with the table's reason.
    operator_action = get_action(action)
    assert operator_action is not None
    admin_why = operator_action.applies(job)
    assert (admin_why is None) == (why is None), (admin_why, why)
    if why is not None:
        assert admin_why is not None and admin_why.startswith(why)

    if action in USER_ACTIONS:
        version = result.document.versions.get(job=job)
        assert job_status(version, job)[USER_ACTIONS[action]] == (why is None)
        page = ph.html(member.client.get(ph.detail_url(result)))
        assert _hidden(page, f'data-action="{action}"') == (why is not None)
        api = APIClient()
        api.force_authenticate(member.user)
        answer = api.post(f"/api/documents/{result.document.pk}/jobs/{job.pk}/{action}")
        if why is None:
            assert answer.status_code == 202, answer.content
        else:
            assert answer.status_code == 409, answer.content
            assert answer.json()["error"]["message"] == why

    # The service, on a fresh job in the same state.
    fresh = ph.job(STATES[state](member))
    assert rules.refusal(action, fresh) == why
    if why is None:
        SERVICES[action](fresh.pk)
    else:
        with pytest.raises(TransitionRefused) as refused:
            SERVICES[action](fresh.pk)
        assert refused.value.message == why


def _hidden(body: str, marker: str) -> bool:
    tag = re.search(rf"<[^>]*{re.escape(marker)}[^>]*>", body, re.DOTALL)
    assert tag is not None, marker
    return " hidden" in tag.group(0)


def test_the_table_allows_each_action_from_where_the_state_graph_does():
    """Statuses the table allows an action from are statuses its transition leaves from."""
    graph: dict[str, set[str]] = {}
    for transition in Job._meta.get_field("status").get_all_transitions(Job):
        graph.setdefault(transition.name, set()).add(str(transition.source))
    by_transition = {"force_retry": "retry"}
    for action in rules.all_actions():
        if action.new_run:
            continue  # the finished job stays as it is; a new job starts
        sources = graph[by_transition.get(action.name, action.name)]
        assert set(map(str, action.allowed_from)) <= sources, action.name
