"""Every operator action on every state: applied where the state graph and the failure's cause
allow it, skipped with a reason everywhere else; each through a service, each an event with the
operator's username and reason."""

from __future__ import annotations

import pytest

from jobs.models import Job, JobEvent, Status
from tests.ops.helpers import STATES, act, advance_to, fail, messages_of, queued, short

pytestmark = pytest.mark.django_db

# action -> {state it applies to: (status after, stage after or None for "unchanged")}
APPLIES: dict[str, dict[str, tuple[str, str | None]]] = {
    "take_over": {"stalled": (Status.QUEUED, None)},
    "give_up": {"stalled": (Status.FAILED, None)},
    "retry": {"failed_retryable": (Status.QUEUED, None)},
    "force_retry": {"failed_retryable": (Status.QUEUED, None), "failed_permanent": (Status.QUEUED, None)},
    "restart": {
        "failed_retryable": (Status.QUEUED, "prepare"),
        "failed_permanent": (Status.QUEUED, "prepare"),
    },
    "cancel": {"queued": (Status.CANCELLED, None), "running": (Status.CANCEL_REQUESTED, None)},
    # The OCR variants never fit a toy job (see test_admin_documents.py for documents).
    "retry_smaller_batch": {},
    "retry_alternative_ocr": {},
}
CASES = [(action, state) for action in APPLIES for state in STATES]


@pytest.mark.parametrize(("action", "state"), CASES, ids=[f"{a}-{s}" for a, s in CASES])
def test_each_action_applies_exactly_where_the_graph_and_the_cause_allow(senior, action, state):
    job = STATES[state]()
    before = JobEvent.objects.filter(job=job).count()
    response = act(senior, action, [job], reason=f"{action} on {state}, ticket OPS-1")
    assert response.status_code == 200
    after = Job.objects.get(pk=job.pk)
    notes = " | ".join(messages_of(response))
    expected = APPLIES[action].get(state)
    if expected is None:
        assert (after.status, after.version) == (job.status, job.version), notes
        assert JobEvent.objects.filter(job=job).count() == before
        assert "Skipped 1 job (" in notes and short(job) in notes
        return
    status, stage = expected
    assert after.status == status, notes
    assert after.stage == (stage or job.stage)
    assert after.version == job.version + 1
    assert "1 job" in notes and short(job) in notes and "Skipped" not in notes
    event = JobEvent.objects.filter(job=job, kind="transition").last()
    assert (event.actor, event.actor_name, event.job_version) == ("operator", "sam", after.version)
    assert event.reason.startswith(f"{action} on {state}, ticket OPS-1")


def test_take_over_revokes_the_lost_workers_lease_and_records_the_operator(senior):
    job = STATES["stalled"]()
    act(senior, "take_over", [job], reason="worker host rebooted")
    job.refresh_from_db()
    assert (job.status, job.worker_token, job.lease_expires_at, job.stage) == (
        "queued",
        None,
        None,
        "prepare",
    )
    event = JobEvent.objects.filter(job=job).last()
    assert (event.name, event.from_status, event.to_status) == ("take_over", "stalled", "queued")
    assert (event.actor_name, event.reason) == ("sam", "worker host rebooted")


def test_an_empty_reason_is_recorded_as_the_actions_default_text(senior):
    job = queued()
    act(senior, "cancel", [job], reason="   ")
    event = JobEvent.objects.filter(job=job).last()
    assert event.name == "cancel" and event.actor_name == "sam"
    assert event.reason.startswith("Cancel") and "no reason given" in event.reason


def test_a_forced_retry_says_in_the_history_that_the_cause_was_overridden(senior):
    job = STATES["failed_permanent"]()
    act(senior, "force_retry", [job], reason="parser fixed in 2.3")
    event = JobEvent.objects.filter(job=job).last()
    assert event.name == "retry"
    assert event.reason == "parser fixed in 2.3 [forced past cause corrupt_input]"


def test_restart_goes_back_to_the_first_stage_from_a_later_failure(senior):
    claim = advance_to(queued(), "pages")
    job = fail(claim, "corrupt_input")
    assert (job.status, job.stage) == ("failed", "pages")
    act(senior, "restart", [job], reason="start over")
    job.refresh_from_db()
    assert (job.status, job.stage, job.checkpoint) == ("queued", "prepare", {})
    assert job.progress == 0


def test_the_confirmation_page_lists_what_will_happen_to_each_job_before_anything_changes(senior):
    from tests.ops.helpers import start_action

    runnable, finished = queued(), STATES["ready"]()
    page = start_action(senior, "cancel", [runnable, finished])
    html = page.content.decode()
    assert page.status_code == 200 and 'name="reason"' in html
    assert "1 of 2" in html and "skipped: The job has already finished (Ready)." in html
    assert Job.objects.get(pk=runnable.pk).status == "queued"  # nothing ran yet


def test_when_no_selected_job_can_be_changed_the_page_says_so_plainly(senior):
    from tests.ops.helpers import start_action

    html = start_action(senior, "cancel", [STATES["ready"](), STATES["ready"]()]).content.decode()
    assert (
        "can be changed by this action: each is listed below with the reason, and nothing will change."
        in html
    )
    assert "The others are listed" not in html
