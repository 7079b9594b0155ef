"""The operator's side of retrieval evaluation: query sets and their queries are edited here,
candidates from the search page are confirmed into a set (only then do runs use them), and
runs are read-only (their job is in the jobs console)."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from documents.evaluation.labels import LabelsInvalid, parse_line
from documents.evaluation.models import (
    EvaluationResult,
    EvaluationRun,
    LabelCandidate,
    LabelledQuery,
    LabelledQuerySet,
)
from documents.kinds import EVALUATE
from documents.selectors import queries_in_sight
from documents.services.evaluation import candidate_confirm
from documents.visibility import staff_hidden_documents, staff_rows, staff_sees_all, staff_viewer
from jobs.admin.registry import register_subject_labels, register_subject_links
from jobs.models import Job


class QueryForm(forms.ModelForm):
    """Labels are checked as an import checks them: keys ``document:<uuid>`` or ``chunk:<id>``,
    grades 0-10; a bad one is a form error, and nothing is saved."""

    class Meta:
        model = LabelledQuery
        fields = ("query_set", "text", "language", "labels")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        labels = data.get("labels")
        if not isinstance(labels, dict) or not labels:
            raise ValidationError({"labels": 'A JSON object such as {"document:<uuid>": 1, "chunk:12": 2}.'})
        relevant: list[Any] = []
        for key in labels:
            kind, _, value = str(key).partition(":")
            if kind == "chunk" and value.isdigit():
                relevant.append(int(value))
            elif kind == "document":
                relevant.append(value)
            else:
                raise ValidationError({"labels": f"{key!r} is neither document:<uuid> nor chunk:<id>."})
        item = {"query": data.get("text") or "", "relevant": relevant, "grades": list(labels.values())}
        try:
            parse_line(json.dumps(item), 1)
        except LabelsInvalid as bad:
            raise ValidationError(bad.reason) from None
        return data


def queries_shown(request: HttpRequest, queries: QuerySet[Any], field: str = "pk") -> QuerySet[Any]:
    """Of ``queries`` (or rows whose ``field`` names one), those whose labels name only documents
    the staff member may see (a query is often a document's title): all with
    ``documents.view_all_documents``; none for staff of no workspace."""
    if staff_sees_all(request.user):
        return queries
    viewer = staff_viewer(request.user)
    if viewer is None:
        return queries.none()
    ids = queries.exclude(**{field: None}).values_list(field, flat=True)
    return queries.filter(**{f"{field}__in": queries_in_sight(viewer, ids)})


class QueryInline(admin.TabularInline):
    model = LabelledQuery
    form = QueryForm
    extra = 1
    fields = ("text", "language", "labels")

    def get_queryset(self, request: HttpRequest) -> QuerySet[LabelledQuery]:
        return queries_shown(request, super().get_queryset(request))


@admin.register(LabelledQuerySet)
class QuerySetAdmin(admin.ModelAdmin):
    list_display = ("name", "collection", "tenant", "query_count", "created_at")
    list_filter = ("tenant",)
    search_fields = ("name",)
    raw_id_fields = ("collection", "tenant")
    inlines = [QueryInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[LabelledQuerySet]:
        return staff_rows(request.user, super().get_queryset(request))

    @admin.display(description="queries")
    def query_count(self, obj: LabelledQuerySet) -> int:
        return obj.queries.count()


@admin.register(LabelledQuery)
class QueryAdmin(admin.ModelAdmin):
    list_display = ("text", "language", "query_set")
    list_filter = ("query_set",)
    search_fields = ("text",)
    raw_id_fields = ("query_set",)

    form = QueryForm

    def get_queryset(self, request: HttpRequest) -> QuerySet[LabelledQuery]:
        rows = staff_rows(request.user, super().get_queryset(request), tenant="query_set__tenant_id")
        return queries_shown(request, rows)


@admin.register(LabelCandidate)
class CandidateAdmin(admin.ModelAdmin):
    list_display = (
        "query",
        "verdict",
        "document_id",
        "collection",
        "created_by",
        "created_at",
        "confirmed_at",
    )
    list_filter = ("verdict", ("confirmed_at", admin.EmptyFieldListFilter))
    search_fields = ("query",)
    actions = ["confirm"]
    readonly_fields = [f.name for f in LabelCandidate._meta.fields]

    def get_queryset(self, request: HttpRequest) -> QuerySet[LabelCandidate]:
        rows = staff_rows(request.user, super().get_queryset(request))
        return rows.exclude(document_id__in=staff_hidden_documents(request.user).values("pk"))

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Confirm as labels (into the collection's newest query set)")
    def confirm(self, request: HttpRequest, queryset: QuerySet[LabelCandidate]) -> None:
        done = 0
        for candidate in queryset.filter(confirmed_at=None):
            candidate_confirm(candidate=candidate)
            done += 1
        messages.success(request, f"{done} candidate(s) confirmed as labels.")


class ResultInline(admin.TabularInline):
    model = EvaluationResult
    fields = ("query_text", "mode", "language", "figures")
    readonly_fields = fields
    extra = 0
    can_delete = False
    max_num = 0

    def get_queryset(self, request: HttpRequest) -> QuerySet[EvaluationResult]:
        return queries_shown(request, super().get_queryset(request), field="query")


@admin.register(EvaluationRun)
class RunAdmin(admin.ModelAdmin):
    list_display = ("query_set", "embedder", "tenant", "job_link", "gate_of", "created_at", "finished_at")
    list_filter = ("tenant", "embedder")
    readonly_fields = [f.name for f in EvaluationRun._meta.fields]
    inlines = [ResultInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[EvaluationRun]:
        return staff_rows(request.user, super().get_queryset(request))

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.method in ("GET", "HEAD")

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="job")
    def job_link(self, obj: EvaluationRun) -> str:
        if not obj.job_id:
            return "—"
        return format_html(
            '<a href="{}">{}</a>', reverse("admin:jobs_job_change", args=[obj.job_id]), obj.job_id
        )


def evaluation_subject_links(job: Job) -> list[tuple[str, str]]:
    """An evaluation job's subject is its run."""
    return [("evaluation run", reverse("admin:documents_evaluationrun_change", args=[job.subject_id]))]


def evaluation_subject_labels(jobs: list[Job], user: Any) -> dict[Any, tuple[str, str]]:
    runs = EvaluationRun.objects.filter(pk__in={job.subject_id for job in jobs})
    names = {str(pk): name for pk, name in runs.values_list("pk", "query_set__name")}
    return {
        job.pk: (
            f"evaluation · {names.get(job.subject_id, '')}".rstrip(" ·"),
            reverse("admin:documents_evaluationrun_change", args=[job.subject_id]),
        )
        for job in jobs
    }


register_subject_links(EVALUATE, evaluation_subject_links)
register_subject_labels(EVALUATE, evaluation_subject_labels)
