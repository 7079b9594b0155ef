from collections.abc import Sequence

from django.urls import URLPattern, URLResolver, path, re_path
from django.urls.resolvers import RoutePattern

from documents.api import (
    access,
    batches,
    collections,
    docs,
    evaluation,
    inspection,
    reindex,
    source_events,
    sources,
    sse,
    views,
    webhooks,
)

JOB = "documents/<str:document_id>/jobs/<str:job_id>"

urlpatterns = [
    path("documents/", views.DocumentsView.as_view(), name="api-documents"),
    path("documents/<str:document_id>/", views.DocumentView.as_view(), name="api-document"),
    path("documents/<str:document_id>/versions/", views.VersionsView.as_view(), name="api-versions"),
    # Lifecycle: both slash forms, without a redirect (it would drop the DELETE).
    path("documents/<str:document_id>", views.DocumentViewWithoutSlash.as_view()),
    re_path(
        r"^documents/(?P<document_id>[^/]+)/versions/(?P<number>[0-9]+)/?$",
        views.VersionView.as_view(),
        name="api-version",
    ),
    re_path(
        r"^documents/(?P<document_id>[^/]+)/versions/(?P<number>[0-9]+)/process-again/?$",
        views.VersionProcessAgainView.as_view(),
        name="api-version-process-again",
    ),
    re_path(
        r"^documents/(?P<document_id>[^/]+)/versions/(?P<number>[0-9]+)/chunks/?$",
        inspection.ChunksView.as_view(),
        name="api-version-chunks",
    ),
    re_path(
        r"^documents/(?P<document_id>[^/]+)/versions/(?P<number>[0-9]+)/text/?$",
        inspection.TextView.as_view(),
        name="api-version-text",
    ),
    path(JOB, views.JobView.as_view(), name="api-job"),
    path(f"{JOB}/cancel", views.JobCancelView.as_view(), name="api-job-cancel"),
    path(f"{JOB}/retry", views.JobRetryView.as_view(), name="api-job-retry"),
    path(f"{JOB}/events", sse.job_events, name="api-job-events"),
    path("search", views.SearchView.as_view(), name="api-search"),
    re_path(r"^batches/?$", batches.BatchesView.as_view(), name="api-batches"),
    re_path(r"^batches/(?P<batch_id>[^/]+)/?$", batches.BatchView.as_view(), name="api-batch"),
    re_path(
        r"^batches/(?P<batch_id>[^/]+)/cancel/?$", batches.BatchCancelView.as_view(), name="api-batch-cancel"
    ),
    re_path(r"^webhooks/?$", webhooks.WebhooksView.as_view(), name="api-webhooks"),
    re_path(r"^webhooks/(?P<endpoint_id>[^/]+)/?$", webhooks.WebhookView.as_view(), name="api-webhook"),
    # Collections: both slash forms, without a redirect (it would drop a PATCH or DELETE body).
    re_path(r"^collections/?$", collections.CollectionsView.as_view(), name="api-collections"),
    re_path(
        r"^collections/(?P<collection_id>[^/]+)/?$",
        collections.CollectionView.as_view(),
        name="api-collection",
    ),
    # Access lists and groups (docs/permissions.md): both slash forms, without a redirect.
    re_path(
        r"^documents/(?P<document_id>[^/]+)/access/?$",
        access.DocumentAccessView.as_view(),
        name="api-document-access",
    ),
    re_path(r"^access/documents/?$", access.BulkAccessView.as_view(), name="api-documents-access"),
    re_path(
        r"^collections/(?P<collection_id>[^/]+)/access/?$",
        access.CollectionAccessView.as_view(),
        name="api-collection-access",
    ),
    re_path(r"^groups/?$", access.GroupsView.as_view(), name="api-groups"),
    re_path(r"^groups/(?P<group_id>[^/]+)/?$", access.GroupView.as_view(), name="api-group"),
    re_path(
        r"^groups/(?P<group_id>[^/]+)/members/?$", access.GroupMembersView.as_view(), name="api-group-members"
    ),
    re_path(
        r"^groups/(?P<group_id>[^/]+)/members/(?P<user_id>[^/]+)/?$",
        access.GroupMemberView.as_view(),
        name="api-group-member",
    ),
    # Evaluation: labelled query sets of a collection, runs (a job kind), comparisons.
    re_path(r"^collections/(?P<collection_id>[^/]+)/query-sets/?$", evaluation.QuerySetsView.as_view()),
    re_path(r"^query-sets/(?P<query_set_id>[^/]+)/?$", evaluation.QuerySetView.as_view()),
    re_path(r"^query-sets/(?P<query_set_id>[^/]+)/queries/?$", evaluation.QueriesImportView.as_view()),
    re_path(r"^query-sets/(?P<query_set_id>[^/]+)/runs/?$", evaluation.RunsView.as_view()),
    re_path(
        r"^evaluation-runs/(?P<run_id>[^/]+)/?$", evaluation.RunView.as_view(), name="api-evaluation-run"
    ),
    re_path(
        r"^evaluation-runs/(?P<run_id>[^/]+)/compare/(?P<other_id>[^/]+)/?$", evaluation.CompareView.as_view()
    ),
    re_path(r"^label-candidates/?$", evaluation.CandidatesView.as_view()),
    # Re-index: a second job kind over the caller's workspace.
    re_path(r"^sources/?$", sources.SourcesView.as_view(), name="api-sources"),
    re_path(r"^sources/(?P<source_id>[^/]+)/?$", sources.SourceView.as_view(), name="api-source"),
    re_path(r"^sources/(?P<source_id>[^/]+)/sync/?$", sources.SourceSyncView.as_view()),
    re_path(
        r"^sources/(?P<source_id>[^/]+)/events/?$", source_events.source_events, name="api-source-events"
    ),
    re_path(r"^reindex/?$", reindex.ReindexView.as_view(), name="api-reindex"),
    re_path(r"^reindex/(?P<job_id>[^/]+)/?$", reindex.ReindexJobView.as_view(), name="api-reindex-job"),
    re_path(r"^reindex/(?P<job_id>[^/]+)/cancel/?$", reindex.ReindexCancelView.as_view()),
    re_path(r"^reindex/(?P<job_id>[^/]+)/retry/?$", reindex.ReindexRetryView.as_view()),
    path("schema/", docs.SchemaView.as_view(), name="api-schema"),
    path("docs/", docs.DocsView.as_view(url_name="api-schema"), name="api-docs"),
]


def _slash_twins(patterns: Sequence[URLPattern | URLResolver]) -> list[URLPattern]:
    """Each ``path()`` route again with the other trailing-slash form (docs/api.md: both
    forms are accepted, without a redirect, which would drop a POST's method and body). The
    schema lists each route once (``documents.api.schema.drop_slash_twins``)."""
    routes = {str(p.pattern) for p in patterns}
    twins = []
    for pattern in patterns:
        if not isinstance(pattern, URLPattern) or not isinstance(pattern.pattern, RoutePattern):
            continue  # re_path routes here already accept both forms (``/?$``)
        route = str(pattern.pattern)
        twin = route[:-1] if route.endswith("/") else f"{route}/"
        if twin not in routes:
            twins.append(path(twin, pattern.callback, pattern.default_args))
    return twins


urlpatterns += _slash_twins(urlpatterns)
