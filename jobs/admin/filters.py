"""List filters of the job admin: stage, error code, tenant, stalled, and two "longer than"s."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import admin
from django.db.models import Count, Exists, OuterRef, QuerySet
from django.http import HttpRequest
from django.utils import timezone

from jobs.errors import all_causes
from jobs.health import TENANT_LIMIT, stage_order
from jobs.models import LEASED, Job, StageRun, Status

DURATIONS = {
    "5m": ("5 minutes", timedelta(minutes=5)),
    "15m": ("15 minutes", timedelta(minutes=15)),
    "1h": ("1 hour", timedelta(hours=1)),
    "6h": ("6 hours", timedelta(hours=6)),
    "1d": ("1 day", timedelta(days=1)),
}


class StageFilter(admin.SimpleListFilter):
    title = "stage"
    parameter_name = "stage"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(name, name) for name in stage_order()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        return queryset.filter(stage=self.value()) if self.value() else queryset


class StalledStageFilter(StageFilter):
    """Only the stages stalled jobs are at (few rows, served by the partial index on stalled)."""

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        order = stage_order()
        stages = set(Job.objects.filter(status=Status.STALLED).values_list("stage", flat=True).distinct())
        return [(name, name) for name in sorted(stages, key=lambda s: (order.get(s, len(order)), s))]


class ErrorCodeFilter(admin.SimpleListFilter):
    title = "error code"
    parameter_name = "error_code"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("none", "(no error)")] + [(c.code, c.code) for c in all_causes()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        if self.value() == "none":
            return queryset.filter(error_code="")
        return queryset.filter(error_code=self.value()) if self.value() else queryset


class TenantFilter(admin.SimpleListFilter):
    """The busiest tenants only (by jobs not yet finished): the list stays short; search finds
    any other tenant by its key."""

    title = "tenant"
    parameter_name = "tenant"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        busiest = (
            Job.objects.exclude(status__in=[Status.READY, Status.CANCELLED])
            .values("tenant")
            .annotate(n=Count("id"))
            .order_by("-n", "tenant")
            .values_list("tenant", flat=True)[:TENANT_LIMIT]
        )
        chosen = self.value()
        tenants = sorted(set(busiest) | ({chosen} if chosen else set()))
        return [(t, t) for t in tenants]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        return queryset.filter(tenant=self.value()) if self.value() else queryset


class StalledFilter(admin.SimpleListFilter):
    title = "stalled"
    parameter_name = "stalled"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Stalled"), ("no", "Not stalled")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        if self.value() == "yes":
            return queryset.filter(status=Status.STALLED)
        if self.value() == "no":
            return queryset.exclude(status=Status.STALLED)
        return queryset


class _LongerThanFilter(admin.SimpleListFilter):
    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(key, label) for key, (label, _) in DURATIONS.items()]

    def cut(self) -> Any:
        value = self.value()
        return timezone.now() - DURATIONS[value][1] if value in DURATIONS else None


class RunningLongerThanFilter(_LongerThanFilter):
    """Jobs whose current attempt (the open stage run) started longer ago than the choice:
    the way to spot a stage that hangs while its heartbeat keeps the lease alive."""

    title = "running longer than"
    parameter_name = "running_for"

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        cut = self.cut()
        if cut is None:
            return queryset
        open_run = StageRun.objects.filter(
            job=OuterRef("pk"), outcome=StageRun.Outcome.RUNNING, started_at__lte=cut
        )
        return queryset.filter(Exists(open_run), status__in=LEASED)


class QueuedLongerThanFilter(_LongerThanFilter):
    """Queued jobs that entered the queue longer ago than the choice (backoffs included)."""

    title = "queued longer than"
    parameter_name = "queued_for"

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        cut = self.cut()
        return queryset if cut is None else queryset.filter(status=Status.QUEUED, queued_at__lte=cut)
