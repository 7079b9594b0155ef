"""The job list and the read-only job page.

Nothing here writes a job: there is no add, change or delete through forms, and every change an
operator makes is an action (``jobs/admin/actions.py``) that calls a service with the version
the page showed.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets, unquote
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html

from jobs.admin import display
from jobs.admin.filters import (
    ErrorCodeFilter,
    QueuedLongerThanFilter,
    RunningLongerThanFilter,
    StageFilter,
    StalledFilter,
    TenantFilter,
)
from jobs.admin.health import health_view
from jobs.admin.mixins import OperatorActionsMixin
from jobs.admin.registry import subject_labels, subject_links
from jobs.models import Job, JobEvent, Status
from jobs.selectors import stage_states

STATUS_COLOURS = {
    Status.UPLOADED: "#607d8b",
    Status.QUEUED: "#1565c0",
    Status.RUNNING: "#2e7d32",
    Status.CANCEL_REQUESTED: "#ef6c00",
    Status.STALLED: "#ad1457",
    Status.READY: "#33691e",
    Status.FAILED: "#c62828",
    Status.CANCELLED: "#757575",
}


def status_badge(job: Job) -> str:
    colour = STATUS_COLOURS.get(Status(job.status), "#555")
    return format_html('<span class="job-status" style="background:{}">{}</span>', colour, job.status)


class JobReadOnlyMixin(admin.ModelAdmin):
    """Jobs change only through services: no add, no change form, no delete."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Job)
class JobAdmin(JobReadOnlyMixin, OperatorActionsMixin):
    # Fits at 1400 px beside the sidebar and the filters: stage and attempt live in the status
    # column, the row version (posted back with actions) in the job column; the change page has
    # every field in full.
    list_display = (
        "job",
        "status_column",
        "tenant",
        "subject",
        "age",
        "lease",
        "worker",
    )
    list_filter = (
        "status",
        StageFilter,
        ErrorCodeFilter,
        TenantFilter,
        StalledFilter,
        RunningLongerThanFilter,
        QueuedLongerThanFilter,
    )
    search_fields = ("subject_id",)  # shows the box; get_search_results does the matching
    search_help_text = "A job id (or its first 8+ hex digits), a subject id or a tenant key."
    list_per_page = 50
    ordering = ("-created_at",)
    empty_value_display = display.DASH
    fieldsets = (
        (None, {"fields": ("id", "kind", "tenant", "subject_id", "subject_version")}),
        ("State", {"fields": ("status", "state", "stage", "status_changes", "attempt", "attempts_total")}),
        ("Retry", {"fields": ("skipped_stages", "hints", "cleanup_from"), "classes": ("collapse",)}),
        (
            "Lease",
            {
                "fields": (
                    "worker_name",
                    "worker_token",
                    "heartbeat_at",
                    "lease_expires_at",
                    "lease",
                    "lost_worker",
                    "not_before",
                    "dispatched_at",
                )
            },
        ),
        ("Progress (display only)", {"fields": ("progress", "processed", "total"), "classes": ("collapse",)}),
        ("Last failure, as the user sees it", {"fields": ("error_code", "error_message")}),
        (
            "Times",
            {
                "fields": (
                    "created_at",
                    "queued_at",
                    "started_at",
                    "cancel_requested_at",
                    "stalled_at",
                    "finished_at",
                    "updated_at",
                ),
                "classes": ("collapse",),
            },
        ),
        ("Input", {"fields": ("payload_pretty",), "classes": ("collapse",)}),
    )
    # Every field on the page is read-only: state changes only through the guarded actions.
    readonly_fields = tuple(flatten_fieldsets(fieldsets))

    # --- columns ------------------------------------------------------------------------------

    @admin.display(description="job", ordering="created_at")
    def job(self, job: Job) -> str:
        # The row version rides along (hidden) so an action on a stale page conflicts.
        return format_html(
            '<span title="{} · version {}">{}</span><input type="hidden" name="seen_version_{}" value="{}">',
            job.pk,
            job.version,
            display.short_id(job.pk),
            job.pk,
            job.version,
        )

    @admin.display(description="status / stage", ordering="status")
    def status_column(self, job: Job) -> str:
        """The status, the stage (or the state word users see where it says more, a stage's
        failure word), the attempt when it is not the first and the error code under it."""
        word = job.state_word()
        where = job.stage if word in (job.status, job.stage) else word
        attempt = f" · attempt {job.attempt}" if job.attempt > 1 else ""
        if not job.error_code:
            return format_html("{} {}<small>{}</small>", status_badge(job), where, attempt)
        return format_html(
            "{} {}<small>{}</small><br><small>{}</small>", status_badge(job), where, attempt, job.error_code
        )

    @admin.display(description="state")
    def state(self, job: Job) -> str:
        return job.state_word()

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        # The subjects' labels for the whole page in one query per kind (the registry), kept on
        # the page's job objects for the subject column.
        changelist = super().get_changelist_instance(request)
        jobs = list(changelist.result_list)
        labels = subject_labels(jobs, request.user)
        for job in jobs:
            job.subject_label = labels.get(job.pk)
        return changelist

    @admin.display(description="status changes")
    def status_changes(self, job: Job) -> int:
        # The row's compare-and-set counter. Not called "version": beside the subject's version
        # it read as one.
        return job.version

    @admin.display(description="subject", ordering="subject_id")
    def subject(self, job: Job) -> str:
        label = getattr(job, "subject_label", None)
        if label is not None:
            text, url = label
            return format_html('<a class="jobs-subject" href="{}" title="{}">{}</a>', url, text, text)
        return format_html('<span title="{}">{}</span>', job.subject_id, display.short_subject(job))

    @admin.display(description="age", ordering="-created_at")
    def age(self, job: Job) -> str:
        return display.human_duration((timezone.now() - job.created_at).total_seconds())

    @admin.display(description="heartbeat", ordering="heartbeat_at")
    def heartbeat(self, job: Job) -> str:
        return display.since(job.heartbeat_at, timezone.now())

    @admin.display(description="lease left", ordering="lease_expires_at")
    def lease(self, job: Job) -> str:
        """Time left on the lease, with the last heartbeat under it (one column: the list fits
        at common widths; the change page has both in full)."""
        now = timezone.now()
        left = display.lease_remaining(job, now)
        if job.heartbeat_at is None or left == display.DASH:
            return left
        return format_html("{}<br><small>beat {}</small>", left, display.since(job.heartbeat_at, now))

    @admin.display(description="worker", ordering="worker_name")
    def worker(self, job: Job) -> str:
        name = job.worker_name or display.DASH
        if job.status == Status.STALLED and job.lost_worker:
            name = f"{job.lost_worker} (lost)"
        return format_html('<span class="jobs-worker" title="{}">{}</span>', name, name)

    @admin.display(description="payload")
    def payload_pretty(self, job: Job) -> str:
        return format_html("<pre>{}</pre>", display.pretty_json(job.payload))

    # --- search: exact keys, and an id prefix -------------------------------------------------

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Job], search_term: str
    ) -> tuple[QuerySet[Job], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        match = Q(subject_id=term) | Q(tenant=term)
        try:
            match |= Q(pk=uuid.UUID(term))
        except ValueError:
            digits = term.replace("-", "").lower()
            if len(digits) >= 8 and all(c in "0123456789abcdef" for c in digits):
                # Lists and messages show the first 8 hex digits; let operators paste them.
                match |= Q(pk__startswith=_uuid_prefix(digits))
        return queryset.filter(match), False

    # --- the job page ---------------------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        health = path("health/", self.admin_site.admin_view(health_view(self.admin_site)), name="jobs_health")
        return [health, *super().get_urls()]

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        job = self.get_object(request, unquote(object_id))
        context = dict(extra_context or {})
        if job is not None:
            context.update(self.job_page_context(request, job))
        return super().change_view(request, object_id, form_url, context)

    def job_page_context(self, request: HttpRequest, job: Job) -> dict[str, Any]:
        """History, attempts with their operator-only detail, checkpoint, links and actions."""
        all_events = request.GET.get("events") == "all"
        events = JobEvent.objects.filter(job=job)
        progress_events = events.filter(kind=JobEvent.Kind.PROGRESS).count()
        if not all_events:
            events = events.exclude(kind=JobEvent.Kind.PROGRESS)
        try:
            stages = stage_states(job)
        except LookupError:  # a kind whose pipeline is no longer registered
            stages = []
        return {
            "job": job,
            "events": list(events.order_by("id")),
            "progress_events": progress_events,
            "all_events": all_events,
            "runs": [
                {
                    "run": run,
                    "duration": display.human_duration(
                        run.duration.total_seconds() if run.duration else None
                    ),
                }
                for run in job.runs.order_by("started_at", "id")
            ],
            "checkpoint": display.pretty_json(job.checkpoint),
            "subject_links": subject_links(job),
            "operator_actions": self.available_actions(request, job),
            "changelist_url": reverse("admin:jobs_job_changelist"),
            "stages": stages,
            "status_badge": status_badge(job),
        }


def _uuid_prefix(digits: str) -> str:
    """A hex prefix in the canonical dashed form (8-4-4-4-12), as PostgreSQL's uuid text shows
    it; SQLite stores the hex without dashes, and Django strips them from the lookup there."""
    groups, out, i = (8, 4, 4, 4, 12), [], 0
    for size in groups:
        if i >= len(digits):
            break
        out.append(digits[i : i + size])
        i += size
    return "-".join(out)
