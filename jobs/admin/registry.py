"""What the apps that own job kinds contribute to the operator console.

The engine knows nothing about the subjects of jobs, so an app registers, for its own job kind,
the links from a job to its subject's admin pages and the retry variants its handlers
understand (hints a stage reads, such as a smaller batch). The jobs admin only asks this
registry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jobs.models import Job

log = logging.getLogger(__name__)

SubjectLinks = Callable[[Job], list[tuple[str, str]]]

_links: dict[str, SubjectLinks] = {}
_variants: dict[str, RetryVariant] = {}


@dataclass(frozen=True)
class RetryVariant:
    """A retry of the failed stage with hints the stage's handler understands.

    Offered only for jobs of ``kind`` that failed in one of ``stages``; it is an ordinary retry
    otherwise (the failure's cause must allow it, no force).
    """

    name: str
    label: str
    hints: Mapping[str, Any]
    kind: str
    stages: tuple[str, ...]
    description: str = field(default="")

    def fits(self, job: Job) -> bool:
        return job.kind == self.kind and job.stage in self.stages


def register_subject_links(kind: str, links: SubjectLinks) -> None:
    """``links(job)`` returns ``[(label, url), ...]`` for the job page of jobs of ``kind``."""
    _links[kind] = links


def subject_links(job: Job) -> list[tuple[str, str]]:
    links = _links.get(job.kind)
    if links is None:
        return []
    try:
        return links(job)
    except Exception:  # a broken link must not take the job page down with it
        log.exception("subject links for job %s failed", job.pk)
        return []


SubjectLabels = Callable[[list[Job], Any], dict[Any, tuple[str, str]]]
_labels: dict[str, SubjectLabels] = {}


def register_subject_labels(kind: str, labels: SubjectLabels) -> None:
    """``labels(jobs, user)`` returns ``{job.pk: (label, url)}`` for a page of jobs of ``kind``
    (one query for the page, not one per row): what the job list shows ``user`` (the operator
    looking) as each job's subject. A job left out shows its subject id."""
    _labels[kind] = labels


def subject_labels(jobs: list[Job], user: Any) -> dict[Any, tuple[str, str]]:
    found: dict[Any, tuple[str, str]] = {}
    for kind in {job.kind for job in jobs}:
        labels = _labels.get(kind)
        if labels is None:
            continue
        try:
            found.update(labels([job for job in jobs if job.kind == kind], user))
        except Exception:  # a broken label must not take the job list down with it
            log.exception("subject labels for kind %s failed", kind)
    return found


def register_retry_variant(variant: RetryVariant) -> RetryVariant:
    _variants[variant.name] = variant
    return variant


def retry_variants() -> list[RetryVariant]:
    return list(_variants.values())


_tenant_link: Callable[[str], str] | None = None


def register_tenant_link(link: Callable[[str], str]) -> None:
    """``link(tenant_key)`` is the admin URL where that tenant (and its quotas) can be edited."""
    global _tenant_link
    _tenant_link = link


def tenant_link(tenant: str) -> str:
    if _tenant_link is None:
        return ""
    try:
        return _tenant_link(tenant)
    except Exception:  # a broken link must not take the health page down with it
        log.exception("tenant link for %s failed", tenant)
        return ""
