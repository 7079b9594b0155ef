"""Jobs in every state (through the services), and driving admin actions as an operator would:
the list posts an action, the confirmation page is read and posted back with a reason."""

from __future__ import annotations

from datetime import timedelta
from html.parser import HTMLParser
from typing import Any

from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from documents.kinds import INGEST as DOC_KIND
from documents.models import Tenant
from documents.services.upload import document_upload
from jobs.errors import StageFailure
from jobs.models import Job
from jobs.services.cleanup import job_run_cleanup
from jobs.services.lifecycle import job_cancel, job_give_up
from jobs.services.reaper import reap
from jobs.services.worker import Claim, job_claim, job_complete_stage, job_fail_stage
from tests.jobs import helpers as jh

JOBS = "/admin/jobs/job/"
STALLED = "/admin/jobs/stalledjob/"


# --- jobs in each state ------------------------------------------------------------------------


def queued(**payload: Any) -> Job:
    return jh.new_job(**payload)


def running(worker: str = "w1") -> Job:
    return jh.reload(jh.running(worker=worker))


def cancel_requested() -> Job:
    return jh.reload(jh.cancel_requested())


def stalled(worker: str = "w1") -> Job:
    """Stalled at the toy pipeline's first stage, which is not resumable: left for an operator.

    The reaper pass that stalls it stalls every other running job too: make stalled jobs first.
    """
    return jh.reload(jh.stalled(worker=worker))


def failed_retryable() -> Job:
    """Failed with a cause users may retry (worker lost: an operator gave a stalled job up)."""
    job = job_give_up(job_id=stalled().pk, actor_name="someone", reason="setup")
    # give_up cleans up after commit, which a test inside one transaction never reaches.
    job_run_cleanup(job_id=job.pk)
    return jh.reload(job)


def failed_permanent() -> Job:
    """Failed with a cause users may not retry (corrupt input)."""
    return jh.failed("corrupt_input")


def complete(claim: Claim | None) -> None:
    while claim is not None:
        claim = job_complete_stage(claim=claim, continue_inline=True)


def ready() -> Job:
    job = queued()
    complete(job_claim(job_id=job.pk, worker="w1"))
    return jh.reload(job)


def cancelled() -> Job:
    return job_cancel(job_id=queued().pk, actor_name="someone")


STATES = {
    "queued": queued,
    "running": running,
    "cancel_requested": cancel_requested,
    "stalled": stalled,
    "failed_retryable": failed_retryable,
    "failed_permanent": failed_permanent,
    "ready": ready,
    "cancelled": cancelled,
}


def advance_to(job: Job, stage: str, worker: str = "w1") -> Claim:
    """Claim ``job`` and complete its stages (without running their handlers) until ``stage``."""
    claim = job_claim(job_id=job.pk, worker=worker)
    assert claim is not None
    while claim.job.stage != stage:
        nxt = job_complete_stage(claim=claim, continue_inline=True)
        assert nxt is not None, f"the pipeline ended before {stage}"
        claim = nxt
    return claim


def fail(claim: Claim, cause: str, detail: str = "operator detail") -> Job:
    try:
        raise StageFailure(cause, detail)
    except StageFailure as error:
        return job_fail_stage(claim=claim, error=error)


def lose_workers_until_failed(job: Job, stage: str) -> Job:
    """Kill the worker of ``stage`` until the reaper gives the job up (worker lost, retryable)."""
    advance_to(job, stage)
    while True:
        reap(now=timezone.now() + timedelta(hours=1))
        job = jh.reload(job)
        if job.status == "failed":
            return job
        assert job_claim(job_id=job.pk, worker="again") is not None


def tenant(slug: str = "acme", **fields: Any) -> Tenant:
    return Tenant.objects.get_or_create(slug=slug, defaults={"name": slug.title(), **fields})[0]


def document_job(slug: str = "acme", text: str = "Harbour lights at dawn.") -> Job:
    """A document-ingestion job (queued at parsing) for a small text upload."""
    result = document_upload(tenant=tenant(slug), data=text.encode(), filename="note.txt")
    assert result.job is not None and result.job.kind == DOC_KIND
    return result.job


# --- an operator's clicks -----------------------------------------------------------------------


class _Inputs(HTMLParser):
    """The named inputs (and textareas) of the form that holds ``confirm``."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[list[tuple[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append([])
        elif tag in ("input", "textarea") and a.get("name") and self.forms and a.get("type") != "submit":
            self.forms[-1].append((a["name"], a.get("value", "")))


def confirmation_fields(html: str) -> list[tuple[str, str]]:
    parser = _Inputs()
    parser.feed(html)
    forms = [f for f in parser.forms if ("confirm", "yes") in f]
    assert len(forms) == 1, "no confirmation form on the page"
    return forms[0]


def start_action(
    client: Client, action: str, jobs: list[Job], *, url: str = JOBS, seen: dict[Any, int] | None = None
) -> Any:
    """Post ``action`` from the list as its form does (with the versions the list rendered)."""
    data: dict[str, Any] = {
        "action": action,
        "index": 0,
        "select_across": 0,
        ACTION_CHECKBOX_NAME: [str(j.pk) for j in jobs],
    }
    for job in jobs:
        data[f"seen_version_{job.pk}"] = (seen or {}).get(job.pk, job.version)
    return client.post(url, data)


def confirm(client: Client, page: Any, *, reason: str = "", url: str = JOBS) -> Any:
    """Fill in the reason on the confirmation page and post its form back."""
    assert page.status_code == 200, page.status_code
    fields = [(k, v) for k, v in confirmation_fields(page.content.decode()) if k != "reason"]
    data: dict[str, list[str]] = {}
    for key, value in [*fields, ("reason", reason)]:
        data.setdefault(key, []).append(value)
    return client.post(url, data, follow=True)


def act(
    client: Client,
    action: str,
    jobs: list[Job],
    *,
    reason: str = "",
    url: str = JOBS,
    seen: dict[Any, int] | None = None,
) -> Any:
    return confirm(client, start_action(client, action, jobs, url=url, seen=seen), reason=reason, url=url)


def messages_of(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def short(job: Job) -> str:
    return str(job.pk).replace("-", "")[:8]


def job_url(job: Job) -> str:
    return reverse("admin:jobs_job_change", args=[job.pk])


def page_action_fields(html: str, action: str) -> list[tuple[str, str]] | None:
    """The fields of the job page's button form for ``action`` (None when not offered)."""
    parser = _Inputs()
    parser.feed(html)
    forms = [f for f in parser.forms if ("action", action) in f]
    return forms[0] if forms else None


def offered_on_page(html: str) -> set[str]:
    parser = _Inputs()
    parser.feed(html)
    return {v for f in parser.forms for k, v in f if k == "action" and ("confirm", "yes") not in f}
