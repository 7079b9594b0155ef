"""The operator's side of sources: a read-only list of every workspace's sources with where
each stands (its last sync's state and counts, the next run) and a "sync now" action; a sync's
job page links back to its source. Sources are made and changed through the API (their folder
is checked there); their syncs' jobs are in the jobs console."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from documents.kinds import SYNC
from documents.sources.models import Source
from documents.sources.schedules import next_run
from documents.sources.selectors import last_sync, location, sync_out
from documents.sources.services import SourceRefused, sync_start
from jobs.admin.registry import register_subject_labels, register_subject_links
from jobs.models import Actor, Job


@admin.register(Source)
class SourceAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "tenant",
        "collection",
        "kind",
        "path",
        "schedule_minutes",
        "schedule_cron",
        "next_sync",
        "last_sync_state",
    )
    list_filter = ("kind", "tenant")
    search_fields = ("name",)
    actions = ["sync_now"]
    readonly_fields = (
        "name",
        "tenant",
        "collection",
        "kind",
        "config",
        "on_removal",
        "schedule_minutes",
        "schedule_cron",
        "next_sync",
        "created_by",
        "created_at",
        "last_sync_state",
    )
    exclude = ("id",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Source]:
        return super().get_queryset(request).select_related("tenant", "collection")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.method in ("GET", "HEAD") and super().has_view_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_sync_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("documents.change_source"))

    @admin.display(description="folder, bucket or site")
    def path(self, obj: Source) -> str:
        return location(obj)

    @admin.display(description="next run")
    def next_sync(self, obj: Source) -> Any:
        return next_run(obj) or "—"

    @admin.display(description="last sync")
    def last_sync_state(self, obj: Source) -> str:
        sync = last_sync(obj)
        if sync is None:
            return "—"
        shown = sync_out(sync)
        counts = " · ".join(f"{key} {value}" for key, value in shown["counts"].items())
        return format_html(
            '<a href="{}">{}</a> {}',
            reverse("admin:jobs_job_change", args=[sync.job_id]),
            shown["state"],
            counts,
        )

    @admin.action(description="Sync now", permissions=["sync"])
    def sync_now(self, request: HttpRequest, queryset: QuerySet[Source]) -> None:
        started = running = 0
        for source in queryset:
            try:
                result = sync_start(
                    source=source, actor=Actor.OPERATOR, actor_name=request.user.get_username()
                )
            except SourceRefused as refused:
                self.message_user(
                    request, f"{source.name}: {refused.message} ({refused.code})", messages.ERROR
                )
                continue
            started, running = (started + 1, running) if result.created else (started, running + 1)
        self.message_user(request, f"Started {started} sync(s); {running} already running.", messages.SUCCESS)


def sync_subject_links(job: Job) -> list[tuple[str, str]]:
    """A sync job's subject is its source."""
    return [("source", reverse("admin:documents_source_change", args=[job.subject_id]))]


def sync_subject_labels(jobs: list[Job], user: Any) -> dict[Any, tuple[str, str]]:
    names = {
        str(pk): name
        for pk, name in Source.objects.filter(pk__in={job.subject_id for job in jobs}).values_list(
            "pk", "name"
        )
    }
    return {
        job.pk: (
            f"sync · {names.get(job.subject_id, '')}".rstrip(" ·"),
            reverse("admin:documents_source_change", args=[job.subject_id]),
        )
        for job in jobs
    }


register_subject_links(SYNC, sync_subject_links)
register_subject_labels(SYNC, sync_subject_labels)
