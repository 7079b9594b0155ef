"""HTML pages for retrieval evaluation (docs/pages.md, "Evaluation"): a collection's query sets,
runs and a chart over time; one run's figures per mode and language; two runs compared per
query; and the search page's "answered my question" / "wrong" buttons, which record candidates
an operator confirms in the admin. The same services as the API underneath, and the same rule:
per-query rows only where the member may see every document the query's labels name."""

from __future__ import annotations

import uuid
from functools import partial
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from documents.evaluation.chart import Point, mrr_svg
from documents.evaluation.labels import LabelsInvalid
from documents.evaluation.metrics import NAMES
from documents.evaluation.models import EvaluationResult, EvaluationRun, LabelledQuerySet
from documents.models import Chunk, Tenant
from documents.pages.document import _see_other, tenant_required
from documents.selectors import access_document, queries_in_sight, viewer_for, visible_documents
from documents.services.collections import collection_of
from documents.services.evaluation import (
    EvaluationRefused,
    candidate_record,
    evaluation_start,
    query_set_create,
    query_set_import,
    runs_compare,
)
from documents.texts import localize
from jobs.models import Actor, Job
from jobs.quotas import QueueFull

MAX_IMPORT_BYTES = 5 * 1024 * 1024


def _run_of(tenant: Tenant, run_id: str) -> EvaluationRun:
    try:
        run = (
            EvaluationRun.objects.select_related("query_set")
            .filter(tenant=tenant, pk=uuid.UUID(run_id))
            .first()
        )
    except ValueError:
        run = None
    if run is None:
        raise Http404
    return run


def _mrr(run: EvaluationRun) -> float | None:
    """The run's headline figure: MRR@10 over all queries, hybrid (or its first mode)."""
    for mode in ("hybrid", *run.summary):
        figures = run.summary.get(mode, {}).get("all")
        if figures:
            return float(figures["mrr@10"])
    return None


def _table(summary: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"mode": mode, "language": language, "queries": f["queries"], "values": [f[n] for n in NAMES]}
        for mode, languages in summary.items()
        for language, f in languages.items()
    ]


@require_http_methods(["GET", "POST"])
@tenant_required
def evaluation_page(request: HttpRequest, tenant: Tenant, collection_id: str) -> HttpResponse:
    """A collection's query sets and runs; POST creates a set, imports JSON Lines into one, or
    starts a run (``action``: create, import, run)."""
    collection = collection_of(tenant, collection_id)
    if collection is None:
        raise Http404
    here = reverse("collection-evaluation", args=[collection.pk])
    if request.method == "POST":
        failed = _act(request, tenant, collection)
        if failed is None:
            return _see_other(here)
        messages.error(request, failed)
    sets = list(LabelledQuerySet.objects.filter(collection=collection))
    runs = list(
        EvaluationRun.objects.filter(query_set__collection=collection).select_related("query_set")[:50]
    )
    jobs = Job.objects.in_bulk([r.job_id for r in runs if r.job_id])
    rows = [{"run": r, "job": jobs.get(r.job_id), "mrr": _mrr(r)} for r in runs]
    finished = [r for r in reversed(runs) if r.summary]
    points = [
        Point(
            f"{r.created_at:%Y-%m-%d %H:%M} {r.embedder}",
            {mode: langs["all"]["mrr@10"] for mode, langs in r.summary.items() if "all" in langs},
        )
        for r in finished
    ]
    context = {
        "collection": collection,
        "sets": [{"set": s, "queries": s.queries.count()} for s in sets],
        "rows": rows,
        "chart": mrr_svg(points),
    }
    return render(
        request, "documents/evaluation.html", context, status=400 if request.method == "POST" else 200
    )


def _act(request: HttpRequest, tenant: Tenant, collection: Any) -> str | None:
    """Do the POSTed action; None when done, else the message to show."""
    action = request.POST.get("action", "")
    try:
        if action == "create":
            query_set_create(collection=collection, name=request.POST.get("name", ""))
            messages.success(request, _("Query set created."))
            return None
        set_id = _uuid(request.POST.get("query_set", ""))
        query_set = (
            LabelledQuerySet.objects.filter(collection=collection, pk=set_id).first() if set_id else None
        )
        if query_set is None:
            raise Http404
        if action == "import":
            upload = request.FILES.get("file")
            if upload is None or (upload.size or 0) > MAX_IMPORT_BYTES:
                return _("Choose a JSON Lines file of at most 5 MB.")
            visible = visible_documents(viewer_for(request.user, tenant))
            added = query_set_import(query_set=query_set, data=upload.read(), visible=visible)
            messages.success(request, _("%(count)d queries imported.") % {"count": added})
            return None
        if action == "run":
            evaluation_start(query_set=query_set, actor=Actor.USER, actor_name=request.user.get_username())
            messages.success(request, _("Evaluation started."))
            return None
    except EvaluationRefused as refused:
        return localize(refused.message)
    except LabelsInvalid as bad:
        return _("Line %(line)d: %(reason)s. Nothing was imported.") % {
            "line": bad.line,
            "reason": bad.reason,
        }
    except QueueFull:
        return _("The workspace's queue is full. Try again later.")
    return _("Unknown action.")


def _uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


@require_GET
@tenant_required
def run_page(request: HttpRequest, tenant: Tenant, run_id: str) -> HttpResponse:
    """One run: its state, figures per mode and language, configuration and per-query rows."""
    run = _run_of(tenant, run_id)
    job = Job.objects.filter(pk=run.job_id).first() if run.job_id else None
    others = EvaluationRun.objects.filter(query_set=run.query_set).exclude(pk=run.pk).exclude(summary={})
    results = list(EvaluationResult.objects.filter(run=run).order_by("query_id", "mode")[:500])
    viewer = viewer_for(request.user, tenant)
    if viewer.principals is not None:  # only the rows whose labelled documents the member may see
        shown = queries_in_sight(viewer, {r.query_id for r in results})
        results = [r for r in results if r.query_id in shown]
    context = {
        "run": run,
        "job": job,
        "names": NAMES,
        "table": _table(run.summary),
        "results": [{"r": r, "values": [r.figures.get(n, 0) for n in NAMES]} for r in results],
        "others": others[:50],
    }
    return render(request, "documents/evaluation_run.html", context)


@require_GET
@tenant_required
def compare_page(request: HttpRequest, tenant: Tenant, run_id: str, other_id: str) -> HttpResponse:
    """``other`` against ``run``: deltas per mode and language, per-query wins and losses."""
    base, other = _run_of(tenant, run_id), _run_of(tenant, other_id)
    if base.query_set_id != other.query_set_id or not base.summary or not other.summary:
        raise Http404
    viewer = viewer_for(request.user, tenant)
    compared = runs_compare(
        base, other, shown=None if viewer.principals is None else partial(queries_in_sight, viewer)
    )
    deltas = [
        {
            "mode": mode,
            "language": language,
            "values": [d.get(n, 0) for n in NAMES],
            "interval": compared["intervals"].get(mode, {}).get(language),
        }
        for mode, languages in compared["deltas"].items()
        for language, d in languages.items()
    ]
    context = {"base": base, "other": other, "names": NAMES, "compared": compared, "deltas": deltas}
    return render(request, "documents/evaluation_compare.html", context)


@require_POST
@tenant_required
def verdict(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    """A search hit marked as answering the question (or wrong): a candidate, not yet a label."""
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = reverse("search")
    if access_document(viewer_for(request.user, tenant), request.POST.get("document", "")) is None:
        raise Http404  # a document the member may not see, as one that does not exist
    chunk = Chunk.objects.filter(
        version_id=_uuid(request.POST.get("version", "")),
        ordinal=int(request.POST["ordinal"]) if request.POST.get("ordinal", "").isdigit() else -1,
    ).first()
    try:
        candidate_record(
            tenant=tenant,
            query=request.POST.get("q", ""),
            document_id=_uuid(request.POST.get("document", "")),
            chunk_id=chunk.pk if chunk else None,
            verdict=request.POST.get("verdict", ""),
            user=request.user,
        )
    except EvaluationRefused as refused:
        messages.error(request, localize(refused.message))
    else:
        messages.success(request, _("Thank you: an operator will review it."))
    return _see_other(back)
