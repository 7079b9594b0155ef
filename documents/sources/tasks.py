"""django-q2 entry points of sources. Thin: they call the services."""

from __future__ import annotations

import logging
from typing import Any

from documents.sources.models import Source
from documents.sources.services import SourceRefused, sync_start
from jobs.models import Actor

log = logging.getLogger(__name__)


def sync_scheduled(source_id: Any) -> str:
    """The scheduler's sync of a source: started, or the running one left to finish."""
    source = Source.objects.select_related("tenant").filter(pk=source_id).first()
    if source is None:
        return "gone"
    try:
        started = sync_start(source=source, actor=Actor.SYSTEM, actor_name="schedule")
    except SourceRefused as refused:
        log.warning("source %s: scheduled sync refused (%s)", source_id, refused.code)
        return refused.code
    return "started" if started.created else "running"
