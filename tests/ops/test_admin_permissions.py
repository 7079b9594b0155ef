"""Who may do what: the takeover and forced-retry permissions are their own; staff without them
do not see those actions and get 403 when they post them anyway. Jobs are never edited through
forms: no add, no delete, and a post to the job page changes nothing."""

from __future__ import annotations

import pytest

from jobs.models import Job, JobEvent
from tests.ops.helpers import JOBS, STALLED, STATES, act, job_url, queued, stalled, start_action

pytestmark = pytest.mark.django_db

ROUTINE = {"give_up", "retry", "retry_smaller_batch", "retry_alternative_ocr", "cancel"}
POWERFUL = {"take_over": "takeover", "force_retry": "force", "restart": "force"}


def menu(client, url=JOBS) -> set[str]:
    response = client.get(url)
    assert response.status_code == 200
    form = response.context.get("action_form")
    if form is None:
        return set()
    return {name for name, _ in form.fields["action"].choices if name}


def test_the_menu_offers_each_staff_member_exactly_the_actions_their_permissions_allow(
    viewer, operator, taker, senior
):
    assert menu(viewer) == set()
    assert menu(operator) == ROUTINE
    assert menu(taker) == {"take_over"}
    assert menu(senior) == ROUTINE | set(POWERFUL)
    assert menu(operator, STALLED) == {"give_up"}
    assert menu(senior, STALLED) == {"take_over", "give_up"}


@pytest.mark.parametrize("action", sorted(POWERFUL))
def test_posting_a_powerful_action_without_its_permission_is_forbidden_and_changes_nothing(operator, action):
    job = STATES["stalled" if action == "take_over" else "failed_permanent"]()
    response = start_action(operator, action, [job])
    assert response.status_code == 403
    confirm_anyway = operator.post(
        JOBS,
        {
            "action": action,
            "_selected_action": [str(job.pk)],
            f"seen_version_{job.pk}": job.version,
            "confirm": "yes",
        },
    )
    assert confirm_anyway.status_code == 403
    assert Job.objects.get(pk=job.pk).version == job.version


@pytest.mark.parametrize("action", ["cancel", "give_up", "take_over"])
def test_a_viewer_who_posts_any_action_is_forbidden(viewer, action):
    job = queued()
    assert start_action(viewer, action, [job]).status_code == 403
    assert start_action(viewer, action, [job], url=STALLED).status_code == 403
    assert Job.objects.get(pk=job.pk).version == job.version


def test_take_over_needs_only_the_takeover_permission(taker):
    job = stalled()
    act(taker, "take_over", [job], reason="on call", url=STALLED)
    assert Job.objects.get(pk=job.pk).status == "queued"
    assert start_action(taker, "cancel", [queued()]).status_code == 403


def test_non_staff_users_are_sent_to_the_login_page(client, django_user_model):
    user = django_user_model.objects.create_user("mallory", password="pw")
    client.force_login(user)
    response = client.get(JOBS)
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_jobs_cannot_be_added_deleted_or_changed_through_forms(senior):
    job = queued()
    assert senior.get(f"{JOBS}add/").status_code == 403
    assert senior.get(f"{job_url(job)}".replace("/change/", "/delete/")).status_code == 403
    assert senior.post(job_url(job).replace("/change/", "/delete/"), {"post": "yes"}).status_code == 403
    page = senior.get(job_url(job))
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()  # Django's read-only change view
    posted = senior.post(
        job_url(job), {"status": "ready", "stage": "finish", "tenant": "evil", "version": 99}
    )
    assert posted.status_code == 403
    after = Job.objects.get(pk=job.pk)
    assert (after.status, after.stage, after.tenant, after.version) == (
        job.status,
        job.stage,
        job.tenant,
        job.version,
    )
    assert JobEvent.objects.filter(job=job).count() == 1  # only its enqueue
    assert "delete_selected" not in menu(senior)
