"""The sources pages: a workspace's sources, and one source with where it stands (its last
sync's state, progress, counts and failed items, the next run) and, for workspace admins, "sync
now". While a sync runs the page reloads itself every few seconds (no script): the line shows
the job's stage and progress from the database, as the API does."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from documents.models import Tenant
from documents.pages.document import _see_other, tenant_required
from documents.selectors import viewer_for
from documents.sources.models import Source
from documents.sources.schedules import next_run
from documents.sources.selectors import last_sync, location, source_of, sources_of, sync_out
from documents.sources.services import SourceRefused, sync_start
from documents.texts import localize
from jobs.models import FINISHED, Actor

RELOAD_SECONDS = 3


def _source(tenant: Tenant, source_id: str) -> Source:
    found = source_of(tenant, source_id)
    if found is None:
        raise Http404
    return found


@require_GET
@tenant_required
def sources_page(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    rows = []
    for source in sources_of(tenant):
        sync = last_sync(source)
        rows.append(
            {
                "source": source,
                "location": location(source),
                "sync": sync_out(sync) if sync is not None else None,
            }
        )
    return render(request, "documents/sources.html", {"rows": rows})


@require_GET
@tenant_required
def source_page(request: HttpRequest, tenant: Tenant, source_id: str) -> HttpResponse:
    source = _source(tenant, source_id)
    sync = last_sync(source)
    shown = sync_out(sync) if sync is not None else None
    running = sync is not None and sync.job.status not in FINISHED
    context = {
        "source": source,
        "location": location(source),
        "sync": shown,
        "running": running,
        "reload_seconds": RELOAD_SECONDS if running else None,
        "next_run": next_run(source),
        "may_sync": viewer_for(request.user, tenant).is_admin,
    }
    return render(request, "documents/source.html", context)


@require_POST
@tenant_required
def source_sync(request: HttpRequest, tenant: Tenant, source_id: str) -> HttpResponse:
    source = _source(tenant, source_id)
    if not viewer_for(request.user, tenant).is_admin:
        raise Http404  # the page offers no button: the same as a source it does not know
    try:
        sync_start(source=source, actor=Actor.USER, actor_name=request.user.get_username())
    except SourceRefused as refused:
        messages.error(request, localize(refused.message))
    return _see_other(reverse("source", args=[source.pk]))
