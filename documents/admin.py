"""Admin for tenants (quotas editable), memberships, documents (title and attributes editable,
through the same service as the API) and versions (read-only).

Staff see every document (its pages, versions, titles in the jobs console, counts) with
``documents.view_all_documents`` (superusers have it); other staff see those of their own
workspace that its access lists let them see (``documents.visibility.staff_documents``), and
any other is absent, answering as an id that does not exist.

Also what the documents app contributes to the jobs console, which knows nothing about
documents: links from a job to its document and version, the OCR retry variants (the OCR stage
understands ``batch_size`` and ``ocr_engine`` hints), and where a tenant's quotas are edited.
"""

# long-module: one admin class per model the app owns, each short and read-only but for its guarded
# actions; one registry is what an operator's admin reads.

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode

from documents.admin_access import make_admins, remove_admins
from documents.admin_base import ReadOnlyAdmin, WorkspaceFilter
from documents.kinds import INGEST as KIND
from documents.kinds import REINDEX as REINDEX_KIND
from documents.models import (
    Collection,
    Deletion,
    Document,
    DocumentVersion,
    Membership,
    Tenant,
    WebhookAttempt,
    WebhookEndpoint,
    WebhookMessage,
)
from documents.services.attributes import (
    DocumentInputError,
    check_attributes,
    check_title,
    document_update,
)
from documents.texts import localize
from documents.visibility import staff_documents, staff_hidden_documents, staff_rows, staff_sees_all
from jobs.admin.registry import (
    RetryVariant,
    register_retry_variant,
    register_subject_labels,
    register_subject_links,
    register_tenant_link,
)
from jobs.models import LEASED, Actor, Job, Status

# --- contributions to the jobs console ------------------------------------------------------


def job_subject_links(job: Job) -> list[tuple[str, str]]:
    links = [("document", reverse("admin:documents_document_change", args=[job.subject_id]))]
    version_id = (
        job.payload.get("version_id")
        or DocumentVersion.objects.filter(job=job).values_list("pk", flat=True).first()
    )
    if version_id:
        links.append(
            (
                f"document version {job.subject_version}",
                reverse("admin:documents_documentversion_change", args=[version_id]),
            )
        )
    return links


register_subject_links(KIND, job_subject_links)


def job_subject_labels(jobs: list[Job], user: Any) -> dict[Any, tuple[str, str]]:
    """The job list's subject column: the document's title and version, linked to the document
    (for the documents ``user`` may see in the admin; the others show their id only)."""
    versions = DocumentVersion.objects.filter(job__in=jobs)
    if not staff_sees_all(user):
        versions = versions.filter(document__in=staff_documents(user, Document.objects.all()))
    versions = versions.select_related("document").only("number", "job_id", "document__title", "document_id")
    return {
        # The version first: a long title is cut at the end of the column, the version stays.
        v.job_id: (
            f"v{v.number} · {v.document.title}",
            reverse("admin:documents_document_change", args=[v.document_id]),
        )
        for v in versions
    }


register_subject_labels(KIND, job_subject_labels)


def reindex_subject_links(job: Job) -> list[tuple[str, str]]:
    """A re-index job's subject is a workspace (its id), its subject version the run's number."""
    return [(f"workspace {job.tenant}", reverse("admin:documents_tenant_change", args=[job.subject_id]))]


def reindex_subject_labels(jobs: list[Job], user: Any) -> dict[Any, tuple[str, str]]:
    """The job list's subject column for re-index runs: the run's number and the workspace."""
    names = dict(Tenant.objects.filter(pk__in={job.subject_id for job in jobs}).values_list("pk", "name"))
    return {
        job.pk: (
            f"re-index {job.subject_version} · {names.get(int(job.subject_id), job.tenant)}",
            reverse("admin:documents_tenant_change", args=[job.subject_id]),
        )
        for job in jobs
        if job.subject_id.isdigit()
    }


register_subject_links(REINDEX_KIND, reindex_subject_links)
register_subject_labels(REINDEX_KIND, reindex_subject_labels)
register_tenant_link(lambda slug: f"{reverse('admin:documents_tenant_changelist')}?{urlencode({'q': slug})}")
register_retry_variant(
    RetryVariant(
        "retry_smaller_batch",
        "Retry OCR with a smaller batch (half)",
        {"batch_size": "halve"},
        kind=KIND,
        stages=("ocr",),
        description="The job is queued again at OCR; the stage recognises half as many pages per batch "
        "(and checkpoints after each), which helps when a batch runs into the stage's deadline.",
    )
)
register_retry_variant(
    RetryVariant(
        "retry_alternative_ocr",
        "Retry OCR with the alternative engine",
        {"ocr_engine": "alternative"},
        kind=KIND,
        stages=("ocr",),
        description="The job is queued again at OCR, which runs on the alternative OCR engine.",
    )
)


def job_link(job: Job | None) -> str:
    """The version's job as its state word, linked to the job page."""
    if job is None:
        return "—"
    return format_html(
        '<a href="{}">{}</a>', reverse("admin:jobs_job_change", args=[job.pk]), job.state_word()
    )


# --- tenants: the quotas are what an operator edits here ------------------------------------


def _count_jobs(statuses: tuple[str, ...]) -> Coalesce:
    jobs = (
        Job.objects.filter(tenant=OuterRef("slug"), status__in=statuses)
        .order_by()
        .values("tenant")
        .annotate(n=Count("id"))
        .values("n")
    )
    return Coalesce(Subquery(jobs, output_field=IntegerField()), 0)


REINDEX_FIELDS = ("active_embedder", "target_embedder", "reindex_job")


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = (
        "slug",
        "name",
        "running_now",
        "max_running_jobs",
        "waiting_now",
        "max_queued_jobs",
        "created_at",
        "active_embedder",
        "reindex",
    )
    list_editable = ("max_running_jobs", "max_queued_jobs")
    search_fields = ("slug", "name")
    fields = (
        "slug",
        "name",
        "max_running_jobs",
        "max_queued_jobs",
        "max_storage_bytes",
        "created_at",
        *REINDEX_FIELDS,
    )
    readonly_fields = ("created_at", *REINDEX_FIELDS)
    actions = ("start_reindex",)
    list_select_related = ("reindex_job",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Tenant]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                running_jobs=_count_jobs(LEASED), waiting_jobs=_count_jobs((Status.UPLOADED, Status.QUEUED))
            )
        )

    def get_readonly_fields(self, request: HttpRequest, obj: Tenant | None = None) -> tuple[str, ...]:
        # The slug is the key jobs carry for this tenant: renaming it would orphan them.
        return ("slug", "created_at", *REINDEX_FIELDS) if obj is not None else self.readonly_fields

    def has_reindex_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("documents.reindex_tenant"))

    @admin.action(
        description="Re-index with the configured embedder (search keeps working)", permissions=["reindex"]
    )
    def start_reindex(self, request: HttpRequest, queryset: QuerySet[Tenant]) -> None:
        # Through the re-index service, as the operator: one job per tenant, refusals reported.
        from documents.services.reindex import ReindexRefused, reindex_start

        if not self.has_reindex_permission(request):  # the admin offers it to no one else either
            raise PermissionDenied
        for tenant in queryset:
            try:
                operator = request.user.get_username()
                job = reindex_start(tenant=tenant, actor=Actor.OPERATOR, actor_name=operator)
            except ReindexRefused as refused:
                self.message_user(request, f"{tenant.slug}: {refused.message}", level=messages.WARNING)
            else:
                self.message_user(request, f"{tenant.slug}: re-index to {job.payload['target']} started.")

    @admin.display(description="re-index")
    def reindex(self, tenant: Tenant) -> str:
        return job_link(tenant.reindex_job)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # deleting a tenant would cascade to its documents; not an admin click

    @admin.display(description="running now", ordering="running_jobs")
    def running_now(self, tenant: Tenant) -> int:
        return int(getattr(tenant, "running_jobs", 0))

    @admin.display(description="waiting now", ordering="waiting_jobs")
    def waiting_now(self, tenant: Tenant) -> int:
        return int(getattr(tenant, "waiting_jobs", 0))


@admin.register(Membership)
class MembershipAdmin(ReadOnlyAdmin):
    list_display = ("user", "tenant", "is_admin", "created_at")
    list_filter = ("is_admin",)
    actions = (make_admins, remove_admins)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # The list's actions (workspace admin or not) need it; the change form stays read only.
        return obj is None and bool(request.user.has_perm("documents.change_membership"))

    list_select_related = ("user", "tenant")
    search_fields = ("user__username", "tenant__slug")


# --- documents and versions -----------------------------------------------------------------


class VersionInline(admin.TabularInline):
    model = DocumentVersion
    fk_name = "document"
    extra = 0
    can_delete = False
    show_change_link = True
    fields = (
        "number",
        "original_name",
        "kind",
        "size",
        "job_state",
        "published_at",
        "superseded_at",
        "bytes_freed_at",
    )
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="job")
    def job_state(self, version: DocumentVersion) -> str:
        return job_link(version.job)


class DocumentForm(forms.ModelForm):
    """Title and attributes, checked by the service's own rules (the same codes as the API)."""

    class Meta:
        model = Document
        fields = ("title", "attributes")
        help_texts = {
            "attributes": 'A JSON object, e.g. {"department": "legal", "year": 2024, '
            '"confidential": false, "signed_on": "2024-03-01"} (up to 16; a YYYY-MM-DD string is a date).'
        }

    def clean_title(self) -> str:
        return _checked(check_title, self.cleaned_data.get("title"))

    def clean_attributes(self) -> dict[str, Any]:
        raw = self.cleaned_data.get("attributes")
        return _checked(check_attributes, {} if raw is None else raw)


def _checked(check: Any, value: Any) -> Any:
    try:
        return check(value)
    except DocumentInputError as exc:
        where = exc.field.partition(".")[2]  # the attribute's name, when the error is about one
        message = localize(exc.message)
        raise ValidationError(f"{where}: {message}" if where else message, code=exc.code) from None


@admin.register(Document)
class DocumentAdmin(ReadOnlyAdmin):
    form = DocumentForm
    list_display = (
        "title",
        "id",
        "tenant",
        "attributes",
        "latest_number",
        "published",
        "collection",
        "created_at",
        "deleted_at",
    )
    list_filter = (("tenant", WorkspaceFilter),)
    list_select_related = ("tenant", "published_version", "collection")
    search_fields = ("=id", "title", "tenant__slug")
    inlines = (VersionInline,)
    actions = ("delete_with_cleanup", "process_again")
    fields = (
        "title",
        "attributes",
        "id",
        "tenant",
        "collection",
        "created_by",
        "created_at",
        "latest_number",
        "latest_version",
        "published_version",
    )
    readonly_fields = fields[2:]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Document]:
        return staff_documents(request.user, super().get_queryset(request))

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Title and attributes only (the form has no other field); versions stay read-only.
        return admin.ModelAdmin.has_change_permission(self, request, obj)

    def save_model(self, request: HttpRequest, obj: Document, form: Any, change: bool) -> None:
        document_update(
            document=obj, title=form.cleaned_data["title"], attributes=form.cleaned_data["attributes"]
        )

    def has_operate_permission(self, request: HttpRequest) -> bool:
        # The same power as the routine job actions ("operate" in jobs/rules.py).
        return bool(request.user.has_perm("jobs.change_job"))

    @admin.action(
        description="Process the latest version again from its stored file (cancelled or failed only)",
        permissions=["operate"],
    )
    def process_again(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        from documents.services.process_again import version_process_again
        from documents.services.upload import UploadRejected
        from jobs.errors import JobConflict

        started: list[str] = []
        refused: list[str] = []
        for document in queryset.filter(deleted_at=None).select_related("latest_version__document__tenant"):
            version = document.latest_version
            if version is None:
                refused.append(f"“{document.title}”: it has no version.")
                continue
            try:
                result = version_process_again(version=version, user=request.user, actor=Actor.OPERATOR)
            except (JobConflict, UploadRejected) as why:
                refused.append(f"“{document.title}”: {why.message}")
            else:
                started.append(f"“{document.title}” as v{result.version.number}")
        if started:
            self.message_user(request, "Processing again (a new version each): " + ", ".join(started) + ".")
        if refused:
            lead = "These were not processed again" if started else "None was processed again"
            self.message_user(request, f"{lead}: " + " ".join(refused), level=messages.WARNING)

    def has_lifecycle_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("documents.delete_document"))

    @admin.action(
        description="Delete the selected documents and everything made from them", permissions=["lifecycle"]
    )
    def delete_with_cleanup(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        # Through the delete service (the raw admin delete would skip the job cancel, the stored
        # files and the audit record): recorded as the operator's.
        from documents.services.delete import document_delete

        done = 0
        for document in queryset.filter(deleted_at=None).select_related("tenant"):
            if document_delete(
                tenant=document.tenant, document_id=document.pk, user=request.user, via="admin"
            ):
                done += 1
        self.message_user(
            request, f"{done} document(s) deleted; their cleanup runs now (the reaper finishes it)."
        )

    @admin.display(description="published")
    def published(self, document: Document) -> str:
        version = document.published_version
        return f"v{version.number}" if version is not None else "—"


@admin.register(Collection)
class CollectionAdmin(ReadOnlyAdmin):
    """Collections with their document counts; deleting goes through ``collection_delete`` (each
    document through the delete service), so the raw admin delete stays off."""

    list_display = ("name", "id", "tenant", "is_default", "documents", "created_at")
    list_filter = (("tenant", WorkspaceFilter), "is_default")
    list_select_related = ("tenant",)
    search_fields = ("=id", "name", "tenant__slug")
    fields = (
        "name",
        "description",
        "metadata",
        "id",
        "tenant",
        "is_default",
        "created_at",
        "text_weight",
        "embedding_weight",
    )
    # Hybrid search's weights are what an operator tunes here; the rest is the services'.
    readonly_fields = fields[:-2]
    actions = ("delete_collections",)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.has_perm("documents.change_collection"))

    def save_model(self, request: HttpRequest, obj: Collection, form: Any, change: bool) -> None:
        from documents.services.collections import CollectionInputError, collection_update

        stored = Collection.objects.get(pk=obj.pk)
        try:
            collection_update(
                collection=stored, text_weight=obj.text_weight, embedding_weight=obj.embedding_weight
            )
        except CollectionInputError as exc:  # the form's clean() refused it first; kept as a guard
            self.message_user(request, str(exc.message), level=messages.ERROR)

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change, **kwargs)

        class WeightsForm(form):  # type: ignore[valid-type,misc]
            def clean(self) -> Any:
                data = super().clean()
                if data.get("text_weight") == 0 and data.get("embedding_weight") == 0:
                    raise ValidationError("At least one of the two weights must be above 0.")
                return data

        return WeightsForm

    def get_queryset(self, request: HttpRequest) -> QuerySet[Collection]:
        counted = Q(documents__deleted_at=None)
        if not staff_sees_all(request.user):  # the count counts what the operator may see
            counted &= Q(documents__in=staff_documents(request.user, Document.objects.all()))
        return super().get_queryset(request).annotate(document_count=Count("documents", filter=counted))

    @admin.display(description="documents", ordering="document_count")
    def documents(self, collection: Any) -> int:
        return int(collection.document_count)

    def has_lifecycle_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("documents.delete_document"))

    @admin.action(
        description="Delete the selected collections and their documents", permissions=["lifecycle"]
    )
    def delete_collections(self, request: HttpRequest, queryset: QuerySet[Collection]) -> None:
        from documents.services.collections import collection_delete

        removed = sum(collection_delete(collection=c, user=request.user, via="admin") for c in queryset)
        self.message_user(request, f"Deleted; {removed} document(s) with them (their cleanup runs now).")


@admin.register(DocumentVersion)
class DocumentVersionAdmin(ReadOnlyAdmin):
    list_display = ("document", "number", "original_name", "kind", "size", "job_state", "published_at")
    list_select_related = ("document", "job")
    search_fields = ("=id", "=document__id", "sha256", "original_name")
    fields = (
        "document",
        "number",
        "original_name",
        "kind",
        "content_type",
        "encoding",
        "size",
        "sha256",
        "reused_from",
        "job_state",
        "created_by",
        "created_at",
        "published_at",
        "superseded_at",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[DocumentVersion]:
        versions = super().get_queryset(request)
        if staff_sees_all(request.user):
            return versions
        return versions.filter(document__in=staff_documents(request.user, Document.objects.all()))

    @admin.display(description="job")
    def job_state(self, version: DocumentVersion) -> str:
        return job_link(version.job)


@admin.register(Deletion)
class DeletionAdmin(ReadOnlyAdmin):
    """The audit trail of deletes: who, when, which ids (no content); kept after the cleanup."""

    list_display = (
        "requested_at",
        "tenant",
        "document_id",
        "version_number",
        "requested_by_name",
        "via",
        "cleaned_at",
        "rows_removed",
        "files_removed",
    )
    list_filter = (("tenant", WorkspaceFilter), "via")
    list_select_related = ("tenant",)
    search_fields = ("=document_id", "requested_by_name")
    fields = (*list_display, "version_ids")
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Deletion]:
        # No content, only ids: a document already gone is listed for its workspace's staff; one
        # still there (its cleanup pending) only for those who may see it.
        deletions = staff_rows(request.user, super().get_queryset(request))
        return deletions.exclude(document_id__in=staff_hidden_documents(request.user).values("pk"))


# --- webhooks: endpoints (read-only: tenants manage them through the API), messages and their
# delivery log, with "send again" --------------------------------------------------------------


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(ReadOnlyAdmin):
    list_display = ("url", "tenant", "events", "enabled", "disabled_reason", "created_at")
    list_filter = ("enabled", ("tenant", WorkspaceFilter))
    list_select_related = ("tenant",)
    search_fields = ("url", "tenant__slug")
    fields = (
        "tenant",
        "url",
        "events",
        "enabled",
        "description",
        "created_at",
        "disabled_at",
        "disabled_reason",
    )
    readonly_fields = fields  # never the secret

    def get_queryset(self, request: HttpRequest) -> QuerySet[WebhookEndpoint]:
        return staff_rows(request.user, super().get_queryset(request))


class AttemptInline(admin.TabularInline):
    model = WebhookAttempt
    fields = ("at", "status_code", "duration_ms", "error")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(WebhookMessage)
class WebhookMessageAdmin(ReadOnlyAdmin):
    list_display = (
        "event_type",
        "endpoint",
        "state",
        "attempts",
        "created_at",
        "next_attempt_at",
        "delivered_at",
    )
    list_filter = ("state", "event_type")
    list_select_related = ("endpoint__tenant",)
    search_fields = ("=id", "endpoint__url")
    fields = (
        "endpoint",
        "event_type",
        "state",
        "attempts",
        "payload",
        "created_at",
        "next_attempt_at",
        "delivered_at",
    )
    readonly_fields = fields
    inlines = (AttemptInline,)
    actions = ("send_again",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[WebhookMessage]:
        rows = staff_rows(request.user, super().get_queryset(request), tenant="endpoint__tenant_id")
        hidden = [str(pk) for pk in staff_hidden_documents(request.user).values_list("pk", flat=True)]
        return rows.exclude(payload__data__document_id__in=hidden) if hidden else rows

    def has_resend_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("documents.change_webhookmessage"))

    @admin.action(description="Send the selected messages again", permissions=["resend"])
    def send_again(self, request: HttpRequest, queryset: QuerySet[WebhookMessage]) -> None:
        from documents.services.webhooks import webhook_message_resend

        ids = list(queryset.values_list("pk", flat=True))
        for pk in ids:
            webhook_message_resend(message_id=pk)
        self.message_user(request, f"{len(ids)} message(s) will be sent again.")


import documents.evaluation.admin  # noqa: E402  (evaluation: query sets, candidates, runs)
import documents.sources.admin  # noqa: E402, F401  (sources: where each stands, sync now)
