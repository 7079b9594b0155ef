"""``/metrics``: the Prometheus text format, parsed by prometheus_client's own parser, with values
that match the database; closed without the token, or from an address outside the list."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from django.db.models import Count
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from jobs import health
from jobs.health import FAILED_ATTEMPTS
from jobs.models import FINISHED, Job, StageRun, Status
from jobs.services.reaper import reap
from jobs.services.worker import job_claim, job_complete_stage
from tests.jobs import helpers as jh
from tests.jobs.helpers import new_job
from tests.ops.helpers import fail, tenant

pytestmark = pytest.mark.django_db

TOKEN = "metrics-s3cret-token"


@pytest.fixture
def token(settings):
    settings.METRICS_TOKEN = TOKEN
    settings.METRICS_ALLOWED_IPS = []
    return {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}


def scrape(client, auth) -> dict[str, list]:
    response = client.get("/metrics", **auth)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    return {f.name: f.samples for f in text_string_to_metric_families(response.content.decode())}


def values(samples, *label_names: str) -> dict:
    return {tuple(s.labels[n] for n in label_names): s.value for s in samples}


@pytest.fixture
def platform(clock):
    """A small platform: jobs in every state, failures of several causes, two tenants."""
    tenant("acme", max_running_jobs=5, max_queued_jobs=50)
    reaped = jh.running(worker="host-z:9")  # will be stalled
    clock.advance(3600)
    reap()
    new_job(), new_job(tenant="globex")
    jh.running(worker="host-a:1")
    fail(jh.running(), "corrupt_input")
    fail(jh.running(), "corrupt_input")
    fail(jh.running(), "internal_error")  # retried later
    claim = job_claim(job_id=new_job().pk, worker="host-b:2")
    clock.advance(4)
    while claim is not None:
        claim = job_complete_stage(claim=claim, continue_inline=True)
    return reaped


def test_counts_by_status_and_stage_match_the_database(client, token, platform):
    families = scrape(client, token)
    live = [s for s in Status if s not in FINISHED]
    in_status = values(families["jobs_in_status"], "status")
    assert in_status == {(s.value,): float(Job.objects.filter(status=s).count()) for s in live}
    by_state = values(families["jobs_by_state"], "kind", "status", "stage")
    db = Job.objects.filter(status__in=live).values_list("kind", "status", "stage").annotate(n=Count("id"))
    assert by_state == {(k, s, st): float(n) for k, s, st, n in db}
    assert families["jobs_stalled"][0].value == Job.objects.filter(status="stalled").count() == 1
    # Final statuses: the jobs that entered them in the window (all of this fixture's, here).
    finished = values(families["jobs_finished"], "status", "window")
    for status in FINISHED:
        count = float(Job.objects.filter(status=status).count())
        assert finished[(status.value, "1h")] == finished[(status.value, "24h")] == count
    assert (finished[("ready", "24h")], finished[("failed", "24h")]) == (1, 2)


def test_failures_by_cause_match_the_stage_runs(client, token, platform):
    families = scrape(client, token)
    failed = values(families["jobs_failed_attempts"], "cause", "window")
    since = timezone.now() - timedelta(hours=1)
    runs = StageRun.objects.filter(outcome__in=FAILED_ATTEMPTS, finished_at__gte=since)
    expected = Counter(code or "unknown" for code in runs.values_list("error_code", flat=True))
    assert {cause: v for (cause, window), v in failed.items() if window == "1h"} == expected
    assert expected == {"corrupt_input": 2, "internal_error": 1, "worker_lost": 1}
    retried = values(families["jobs_retried_attempts"], "cause", "window")
    assert retried[("internal_error", "1h")] == 1 and retried[("corrupt_input", "1h")] == 0
    jobs_failed = values(families["jobs_failed_jobs"], "cause", "window")
    assert (
        jobs_failed[("corrupt_input", "24h")]
        == Job.objects.filter(status="failed", error_code="corrupt_input").count()
    )


def test_a_cause_alerts_at_its_threshold_and_reads_zero_while_clear(client, token, platform, settings):
    alerting = values(scrape(client, token)["jobs_cause_alerting"], "cause")
    # Every cause that can alert is there, zeros included: internal_error failed once (of 3).
    assert alerting[("internal_error",)] == 0 and alerting[("sandbox_failed",)] == 0
    assert ("corrupt_input",) not in alerting  # the input's fault: no alert at all
    settings.JOBS_CAUSE_ALERTS = {"internal_error": 1}
    families = scrape(client, token)
    assert values(families["jobs_cause_alerting"], "cause")[("internal_error",)] == 1
    assert values(families["jobs_cause_alert_threshold"], "cause")[("internal_error",)] == 1


def test_tenants_timings_age_and_workers(client, token, platform, clock):
    clock.advance(20)
    families = scrape(client, token)
    running = values(families["jobs_tenant_running"], "tenant")
    waiting = values(families["jobs_tenant_waiting"], "tenant")
    assert (
        running[("acme",)]
        == Job.objects.filter(tenant="acme", status__in=["running", "cancel_requested"]).count()
    )
    # acme: one new job and the one retried later (backing off in the queue); globex: one.
    assert waiting == {("acme",): 2.0, ("globex",): 1.0}
    assert values(families["jobs_tenant_running_limit"], "tenant") == {("acme",): 5.0}
    assert families["jobs_oldest_queued_age_seconds"][0].value == pytest.approx(24, abs=0.01)
    # A real histogram: the one completed prepare attempt (4 s) is counted in le="5.0" and above.
    durations = {
        (s.name, s.labels["stage"], s.labels.get("le")): s.value
        for s in families["jobs_stage_duration_seconds"]
    }
    assert durations[("jobs_stage_duration_seconds_bucket", "prepare", "2.5")] == 0
    assert durations[("jobs_stage_duration_seconds_bucket", "prepare", "5.0")] == 1
    assert durations[("jobs_stage_duration_seconds_bucket", "prepare", "+Inf")] == 1
    assert durations[("jobs_stage_duration_seconds_count", "prepare", None)] == 1
    assert durations[("jobs_stage_duration_seconds_sum", "prepare", None)] == pytest.approx(4.0)
    waits = {(s.name, s.labels["stage"]): s.value for s in families["jobs_queue_wait_seconds"]}
    # Claims of prepare: the stalled job, the running one, three failed/retried, the ready one.
    assert waits[("jobs_queue_wait_seconds_count", "prepare")] == 6
    # host-a:1, host-b:2 and w1 (which failed its jobs) beat within one lease; host-z:9 did not.
    assert families["jobs_live_workers"][0].value == 3


def test_tenant_labels_are_capped_and_the_rest_summed(client, token, monkeypatch):
    for name in ("t1", "t2", "t3", "t4"):
        new_job(tenant=name)
    monkeypatch.setattr(health, "TENANT_LIMIT", 2)
    waiting = values(scrape(client, token)["jobs_tenant_waiting"], "tenant")
    assert len(waiting) == 3 and waiting[("__other__",)] == 2
    assert sum(waiting.values()) == 4


def test_a_missing_token_is_401_and_a_wrong_one_403_in_the_api_error_shape(client, token):
    missing = client.get("/metrics")
    assert missing.status_code == 401
    assert missing["WWW-Authenticate"].startswith("Bearer")
    assert missing.json()["error"]["code"] == "not_authenticated" and missing.json()["error"]["message"]
    wrong = client.get("/metrics", HTTP_AUTHORIZATION="Bearer nope")
    assert wrong.status_code == 403 and wrong.json()["error"]["code"] == "invalid_token"
    basic = client.get("/metrics", HTTP_AUTHORIZATION=f"Basic {TOKEN}")
    assert basic.status_code == 401
    assert TOKEN not in wrong.content.decode()


def test_closed_when_nothing_is_configured(client, settings):
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_IPS = []
    response = client.get("/metrics")
    assert response.status_code == 403 and response.json()["error"]["code"] == "metrics_disabled"


def test_the_address_allow_list(client, settings):
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_IPS = ["10.0.0.0/8", "not-an-address"]
    refused = client.get("/metrics", HTTP_X_FORWARDED_FOR="10.1.2.3")  # the header is not trusted
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden_address"
    settings.METRICS_ALLOWED_IPS = ["127.0.0.0/8"]
    assert client.get("/metrics").status_code == 200  # the test client is 127.0.0.1


def test_address_and_token_together_need_both(client, token, settings):
    settings.METRICS_ALLOWED_IPS = ["127.0.0.1"]
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", **token).status_code == 200
    settings.METRICS_ALLOWED_IPS = ["192.0.2.1"]
    assert client.get("/metrics", **token).status_code == 403


def test_only_get(client, token):
    response = client.post("/metrics", **token)
    assert response.status_code == 405 and response.json()["error"]["code"] == "method_not_allowed"
