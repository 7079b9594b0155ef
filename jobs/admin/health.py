"""The admin's health page: the figures of ``jobs.health`` for people who would rather look.

The page is a custom admin view (``/admin/jobs/job/health/``) linked from the admin index and the
job list. Values are formatted here (durations, rates, quota bars) so the template stays plain.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.admin import AdminSite
from django.core.checks import WARNING, run_checks
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from jobs.admin.chart import throughput_svg
from jobs.admin.display import human_duration, since
from jobs.admin.registry import tenant_link
from jobs.health import Health, TenantLoad, snapshot
from jobs.models import Status


@dataclass(frozen=True)
class Tile:
    label: str
    value: str
    note: str = ""
    alert: bool = False
    url: str = ""


@dataclass(frozen=True)
class TenantRow:
    load: TenantLoad
    url: str
    running_pct: int
    queued_pct: int


def _pct(value: int, limit: int | None) -> int:
    if not limit:
        return 100 if value and limit == 0 else 0
    return min(100, round(100 * value / limit))


def _rate(failed: int, finished: int) -> str:
    if not finished:
        return _("no attempts")
    return _("%(rate).1f%% (%(failed)s of %(finished)s)") % {
        "rate": 100 * failed / finished,
        "failed": failed,
        "finished": finished,
    }


# The finished statuses' tiles; the status itself stays the value the job list filters on.
_FINISHED_LABELS = {
    Status.READY.value: gettext_lazy("Ready, 24 h"),
    Status.FAILED.value: gettext_lazy("Failed, 24 h"),
    Status.CANCELLED.value: gettext_lazy("Cancelled, 24 h"),
}


def _running(count: int) -> str:
    return ngettext("%(count)s job", "%(count)s jobs", count) % {"count": count}


def tiles(health: Health) -> list[Tile]:
    """The figures at the top of the page, labelled in the request's language."""
    changelist = reverse("admin:jobs_job_changelist")
    totals = health.status_totals
    busy = sum(w.running for w in health.workers)
    return [
        Tile(_("Running"), str(totals.get(Status.RUNNING, 0)), url=f"{changelist}?status__exact=running"),
        Tile(_("Queued"), str(totals.get(Status.QUEUED, 0)), url=f"{changelist}?status__exact=queued"),
        Tile(
            _("Stalled"),
            str(health.stalled),
            _("waiting for an operator") if health.stalled else "",
            alert=health.stalled > 0,
            url=reverse("admin:jobs_stalledjob_changelist"),
        ),
        Tile(_("Oldest queued"), human_duration(health.oldest_queued_age), _("since it entered the queue")),
        Tile(
            _("Failure rate, 1 h"),
            _rate(health.attempts_hour.failed, health.attempts_hour.finished),
            _("of finished attempts"),
        ),
        Tile(_("Failure rate, 24 h"), _rate(health.attempts_day.failed, health.attempts_day.finished)),
        Tile(
            _("Live workers"),
            str(len(health.workers)),
            _("idle or busy; %(running)s running") % {"running": _running(busy)},
        ),
        # Final statuses only grow: counted as jobs that entered them in the window, not in total.
        *(
            Tile(
                str(_FINISHED_LABELS.get(f.status, f"{f.status.capitalize()}, 24 h")),
                str(f.day),
                _("entered in the last 24 h (%(hour)s in the last hour)") % {"hour": f.hour},
                url=f"{changelist}?status__exact={f.status}",
            )
            for f in health.finished
        ),
    ]


def state_matrix(health: Health) -> dict[str, Any]:
    """Rows (kind, stage) by status columns: jobs not yet finished, only the statuses that occur."""
    columns = [s.value for s in Status if health.status_totals.get(s.value)]
    rows: dict[tuple[str, str], dict[str, int]] = {}
    for state in health.states:
        rows.setdefault((state.kind, state.stage), {})[state.status] = state.count
    return {
        "columns": columns,
        "rows": [
            {
                "kind": kind,
                "stage": stage,
                "counts": [counts.get(c, 0) for c in columns],
                "total": sum(counts.values()),
            }
            for (kind, stage), counts in rows.items()
        ],
        "totals": [health.status_totals.get(c, 0) for c in columns],
    }


@dataclass(frozen=True)
class CauseAlert:
    message: str
    hint: str
    url: str


def cause_alerts(health: Health) -> list[CauseAlert]:
    """A line per cause failing at or above its alert threshold in the last hour: how often, what
    an operator checks first, and the jobs that carry it."""
    changelist = reverse("admin:jobs_job_changelist")
    return [
        CauseAlert(
            _("%(cause)s: %(count)s failed attempts in the last hour (the alert starts at %(limit)s).")
            % {"cause": rates.cause, "count": rates.hour.failed_attempts, "limit": rates.alert_from},
            _(rates.operator_hint) if rates.operator_hint else "",
            f"{changelist}?error_code={rates.cause}",
        )
        for rates in health.alerts
    ]


def health_context(health: Health) -> dict[str, Any]:
    tenants = [
        TenantRow(
            load,
            tenant_link(load.tenant),
            _pct(load.running, load.max_running),
            _pct(load.queued, load.max_queued),
        )
        for load in health.tenants
    ]
    return {
        "health": health,
        "alerts": cause_alerts(health),
        "tiles": tiles(health),
        "matrix": state_matrix(health),
        "timings": [
            {
                "stage": t.stage,
                "wait_n": t.wait.samples,
                "wait_median": human_duration(t.wait.median),
                "wait_p95": human_duration(t.wait.p95),
                "duration_n": t.duration.samples,
                "duration_median": human_duration(t.duration.median),
                "duration_p95": human_duration(t.duration.p95),
            }
            for t in health.timings
        ],
        "tenants": tenants,
        "workers": [
            {"name": w.name, "seen": since(w.last_heartbeat, health.at), "running": w.running}
            for w in health.workers
        ],
        "chart": throughput_svg(health.throughput),
    }


def configuration_warnings() -> list[str]:
    """System-check warnings and errors an operator should see here too, not only in
    ``manage.py check``: those of the checks an app tags ``health``."""
    return [
        f"{message.msg} {message.hint or ''}".strip()
        for message in run_checks(tags=["health"])
        if message.level >= WARNING
    ]


def health_view(admin_site: AdminSite) -> Callable[[HttpRequest], HttpResponse]:
    """The view, bound to the admin site whose chrome (header, sidebar) it renders in."""

    def view(request: HttpRequest) -> HttpResponse:
        user = request.user
        if not (user.has_perm("jobs.view_job") or user.has_perm("jobs.change_job")):
            raise PermissionDenied
        context = {
            **admin_site.each_context(request),
            "title": _("Job health"),
            "subtitle": None,
            **health_context(snapshot()),
            "warnings": configuration_warnings(),
        }
        return TemplateResponse(request, "admin/jobs/health.html", context)

    return view
