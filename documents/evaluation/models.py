"""The tables of retrieval evaluation (imported by ``documents.models``, the app's model module).

A labelled query set belongs to one collection; its queries carry labels: a key per relevant
document (``document:<uuid>``) or chunk (``chunk:<id>``) with a grade (1 relevant, higher more
so, 0 explicitly not relevant). Candidates come from the search page's buttons and are not
labels until an operator confirms them. A run is one evaluation job's figures and the
configuration that produced them; its per-query rows are written a batch at a time.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class LabelledQuerySet(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("documents.Tenant", on_delete=models.CASCADE, related_name="+")
    collection = models.ForeignKey(
        "documents.Collection", on_delete=models.CASCADE, related_name="query_sets"
    )
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = _("labelled query set")
        verbose_name_plural = _("labelled query sets")
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name


class LabelledQuery(models.Model):
    query_set = models.ForeignKey(LabelledQuerySet, on_delete=models.CASCADE, related_name="queries")
    text = models.TextField()
    # BCP 47-ish code ("en", "zh"); empty: detected from the text when a run groups by language.
    language = models.CharField(max_length=16, blank=True, default="")
    # {"document:<uuid>": grade, "chunk:<id>": grade}
    labels = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = _("labelled query")
        verbose_name_plural = _("labelled queries")
        ordering = ["id"]

    def __str__(self) -> str:
        return self.text[:80]


class Verdict(models.TextChoices):
    RELEVANT = "relevant", _("answered the question")
    WRONG = "wrong", _("wrong")


class LabelCandidate(models.Model):
    """A searcher's verdict on one hit, waiting for an operator to confirm it into a set."""

    tenant = models.ForeignKey("documents.Tenant", on_delete=models.CASCADE, related_name="+")
    collection = models.ForeignKey("documents.Collection", on_delete=models.CASCADE, related_name="+")
    query = models.TextField()
    document_id = models.UUIDField()
    chunk_id = models.BigIntegerField(null=True, blank=True)
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    confirmed_into = models.ForeignKey(
        LabelledQuerySet, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        verbose_name = _("label candidate")
        verbose_name_plural = _("label candidates")
        ordering = ["-created_at"]


class EvaluationRun(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("documents.Tenant", on_delete=models.CASCADE, related_name="+")
    query_set = models.ForeignKey(LabelledQuerySet, on_delete=models.CASCADE, related_name="runs")
    job = models.OneToOneField("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # The re-index whose gate made this run (its before/after pair), if any.
    gate_of = models.ForeignKey(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    embedder = models.CharField(max_length=100)
    modes = models.JSONField(default=list)
    config = models.JSONField(default=dict)  # what produced the figures: embedder, chunking, fusion
    summary = models.JSONField(default=dict)  # {mode: {language: {"queries": n, metric: value}}}
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("evaluation run")
        verbose_name_plural = _("evaluation runs")
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.query_set} · {self.embedder} · {self.created_at:%Y-%m-%d %H:%M}"


class EvaluationResult(models.Model):
    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="results")
    query = models.ForeignKey(LabelledQuery, null=True, on_delete=models.SET_NULL, related_name="+")
    query_text = models.TextField()
    language = models.CharField(max_length=16)
    mode = models.CharField(max_length=16)
    figures = models.JSONField(default=dict)
    hits = models.JSONField(default=list)  # the first hits' label keys, for reading a loss

    class Meta:
        verbose_name = _("evaluation result")
        verbose_name_plural = _("evaluation results")
        constraints = [models.UniqueConstraint(fields=["run", "query", "mode"], name="eval_result_once")]
