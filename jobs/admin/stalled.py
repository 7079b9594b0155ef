"""The stalled-jobs list: the jobs an operator must decide on, oldest first.

``StalledJob`` is a proxy of :class:`jobs.models.Job` (no table of its own) that exists only so
the admin can list stalled jobs on their own page, with their own columns and actions. It lives
here rather than in ``jobs/models.py`` because it is part of the console, not of the engine; its
migration is ``jobs/migrations/0003``. It has no permissions of its own: seeing it needs
``jobs.view_job``, acting needs the job permissions (see ``jobs/admin/actions.py``).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from jobs.admin import display
from jobs.admin.actions import can_give_up, can_take_over
from jobs.admin.filters import StalledStageFilter, TenantFilter
from jobs.admin.job import JobReadOnlyMixin
from jobs.admin.mixins import OperatorActionsMixin
from jobs.models import Job, Status


class StalledJob(Job):
    class Meta:
        proxy = True
        app_label = "jobs"
        verbose_name = _("stalled job")
        verbose_name_plural = _("stalled jobs")
        ordering = ["stalled_at"]
        default_permissions = ()


@admin.register(StalledJob)
class StalledJobAdmin(JobReadOnlyMixin, OperatorActionsMixin):
    operator_action_names = ("take_over", "give_up")
    list_display = (
        "job",
        "tenant",
        "subject",
        "stage",
        "stalled_for",
        "last_heartbeat",
        "lost_worker",
        "attempts",
        "checkpoint_reached",
        "decision",
        "seen_version",
    )
    list_display_links = None
    list_filter = (StalledStageFilter, TenantFilter)
    ordering = ("stalled_at", "created_at")
    list_per_page = 100
    empty_value_display = display.DASH

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).filter(status=Status.STALLED)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        user = request.user
        return bool(user.has_perm("jobs.view_job") or user.has_perm("jobs.change_job"))

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.has_view_permission(request)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        # One job page: the stalled list links to it, this keeps hand-typed URLs working too.
        return HttpResponseRedirect(reverse("admin:jobs_job_change", args=[object_id]))

    @admin.display(description="job", ordering="created_at")
    def job(self, job: Job) -> str:
        url = reverse("admin:jobs_job_change", args=[job.pk])
        return format_html('<a href="{}" title="{}">{}</a>', url, job.pk, display.short_id(job.pk))

    @admin.display(description="subject", ordering="subject_id")
    def subject(self, job: Job) -> str:
        return format_html(
            '<span title="{} {}">{}</span>', job.kind, job.subject_id, display.short_subject(job)
        )

    @admin.display(description="stalled for", ordering="stalled_at")
    def stalled_for(self, job: Job) -> str:
        return display.since(job.stalled_at, timezone.now())

    @admin.display(description="last heartbeat", ordering="heartbeat_at")
    def last_heartbeat(self, job: Job) -> str:
        if job.heartbeat_at is None:
            return display.DASH
        return format_html(
            '<span title="{}">{}</span>',
            job.heartbeat_at.isoformat(),
            display.since(job.heartbeat_at, timezone.now()),
        )

    @admin.display(description="attempts")
    def attempts(self, job: Job) -> str:
        return f"{job.attempt} ({job.attempts_total} in all)"

    @admin.display(description="checkpoint reached")
    def checkpoint_reached(self, job: Job) -> str:
        return display.checkpoint_summary(job.checkpoint)

    @admin.display(description="possible")
    def decision(self, job: Job) -> str:
        """What the graph allows for this job (the operator's permissions decide the rest)."""
        possible = [
            name
            for name, why in (("take over", can_take_over(job)), ("give up", can_give_up(job)))
            if why is None
        ]
        note = " (cancel pending: the reaper finishes it)" if job.cancel_requested_at else ""
        return (", ".join(possible) or display.DASH) + note
