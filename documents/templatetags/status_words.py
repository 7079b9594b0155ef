"""The words users see for a job's status, in their language.

The API and the status JSON keep English codes (``embedding_failed``, ``reupload``); pages map
those codes to translated text here, and only here (a failure cause's message is the one its job
kind registered, in ``documents/causes.py`` or ``jobs/errors.py``, translated): the templates use
the filters below and the document page's script gets the same texts through
:func:`js_catalog`, so a live update and a server render never say different things. Unknown
codes fall back to the code itself (or, for failure causes, to the user-safe English message
the status JSON carries).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django import template
from django.utils.dateformat import format as format_date
from django.utils.dateparse import parse_datetime
from django.utils.functional import Promise
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext, gettext_lazy, pgettext_lazy
from django.utils.translation import gettext_lazy as _

from documents.kinds.ingest import STATE_LABELS
from jobs.errors import all_causes

register = template.Library()

# The state words' labels are the ingestion pipeline's own (documents/kinds/ingest.py), so a page and
# a refusal's reason name a state with the same words.
STATES: dict[str, Promise] = {word: gettext_lazy(label) for word, label in STATE_LABELS.items()}

# Stage names as the stepper shows them (the pipeline's own labels are English only).
STAGES: dict[str, Promise] = {
    "parsing": pgettext_lazy("stage", "Parsing"),
    "ocr": pgettext_lazy("stage", "OCR"),
    "chunking": pgettext_lazy("stage", "Chunking"),
    "embedding": pgettext_lazy("stage", "Embedding"),
    "indexing": pgettext_lazy("stage", "Indexing"),
}

STAGE_STATES: dict[str, Promise] = {
    "done": pgettext_lazy("stage state", "done"),
    "running": pgettext_lazy("stage state", "running"),
    "waiting": pgettext_lazy("stage state", "waiting"),
    "skipped": pgettext_lazy("stage state", "skipped"),
    "failed": pgettext_lazy("stage state", "failed"),
    "cancelled": pgettext_lazy("stage state", "cancelled"),
}

# "130 of 200 pages": one format per unit a stage counts in (see documents/kinds/ingest.py).
COUNTS: dict[str, Promise] = {
    "pages": _("%(processed)s of %(total)s pages"),
    "chunks": _("%(processed)s of %(total)s chunks"),
    "batches": _("%(processed)s of %(total)s batches"),
    "": _("%(processed)s of %(total)s"),
}

ACTIONS: dict[str, Promise] = {
    "reupload": _("Upload a corrected copy of the file."),
    "retry": _("Retry processing."),
    "wait": _("Wait: processing continues automatically."),
    "contact_operator": _("Contact your operator and mention the job reference below."),
}

# Where a version stands in the document's history (see documents/pages/document.py: version_role).
ROLES: dict[str, Promise] = {
    "published": pgettext_lazy("version role", "Published"),
    "processing": pgettext_lazy("version role", "Processing"),
    "failed": pgettext_lazy("version role", "Failed"),
    "cancelled": pgettext_lazy("version role", "Cancelled"),
    "superseded": pgettext_lazy("version role", "Superseded"),
    "not_published": pgettext_lazy("version role", "Not published"),
}

STAGE_LINE = _("Stage %(index)s of %(count)s · %(label)s")
SEARCHABLE_SINCE = _("Searchable since %(time)s (version %(version)s)")
# The status card's sentences about the stored file, as the card's template says them.
BYTES_KEPT = _(
    "The uploaded file of this version is kept until %(when)s for retries and processing again; "
    "then it is removed."
)
BYTES_FREED = _(
    "The uploaded file of this version was removed on %(when)s: files of stopped or replaced "
    "versions are kept only for a while. It can no longer be retried or processed again; upload "
    "the file again to process it."
)


def _word(words: dict[str, Promise], code: Any) -> str:
    return str(words.get(str(code), code or ""))


@register.filter
def state_label(code: str) -> str:
    """``embedding_failed`` -> "Embedding failed" in the active language."""
    return _word(STATES, code)


@register.filter
def stage_label(code: str) -> str:
    return _word(STAGES, code)


@register.filter
def stage_state_label(code: str) -> str:
    return _word(STAGE_STATES, code)


@register.filter
def role_label(code: str) -> str:
    return _word(ROLES, code)


@register.filter
def action_label(code: str) -> str:
    return _word(ACTIONS, code)


@register.filter
def cause_message(error: dict[str, Any] | None) -> str:
    """The user-safe message of a status JSON ``error``, translated by its cause code."""
    if not error:
        return ""
    known = {cause.code: cause for cause in all_causes()}.get(error.get("code", ""))
    return gettext(known.user_message) if known is not None else str(error.get("message", ""))


@register.filter
def stage_line(status: dict[str, Any]) -> str:
    """The stage as a sentence: "Stage 3 of 5 · Chunking"."""
    return str(STAGE_LINE) % {
        "index": status["stage_index"],
        "count": status["stage_count"],
        "label": stage_label(status["stage"]),
    }


@register.filter
def counts(status: dict[str, Any]) -> str:
    """Counts like "130 of 200 pages"; "" when the stage has no real total, or when the job is
    ready (the last stage's count would only distract from 100%)."""
    if status.get("status") == "ready" or status.get("processed") is None or not status.get("total"):
        return ""
    words = COUNTS.get(status.get("unit") or "", COUNTS[""])
    return str(words) % {"processed": status["processed"], "total": status["total"]}


@register.filter
def percent(progress: float | None) -> int:
    """Whole percent, rounded down so that 99.6 never reads as 100 before ``ready``."""
    return int(progress or 0)


@register.simple_tag
def local_time(value: str | datetime | None) -> SafeString | str:
    """A ``<time>`` in UTC; the pages' script rewrites it in the reader's time zone and language."""
    moment = parse_datetime(value) if isinstance(value, str) else value
    if moment is None:
        return ""
    moment = moment.astimezone(UTC)
    return format_html(
        '<time datetime="{}" data-local>{} UTC</time>',
        moment.isoformat(),
        format_date(moment, "Y-m-d H:i:s"),
    )


@register.simple_tag
def searchable_since(moment: str | datetime | None, version: int) -> SafeString:
    """The sentence "Searchable since <time> (version 2)", the time element kept as markup."""
    # Split around the time so that format_html escapes the sentence's text, but not the element.
    sentence = str(SEARCHABLE_SINCE) % {"time": "\x00", "version": version}
    before, _sep, after = sentence.partition("\x00")
    return format_html("{}{}{}", before, local_time(moment), after)


def js_catalog() -> dict[str, Any]:
    """Every text the document page's script may need, in the active language."""

    def texts(words: dict[str, Promise]) -> dict[str, str]:
        return {code: str(word) for code, word in words.items()}

    return {
        "states": texts(STATES),
        "stages": texts(STAGES),
        "stageStates": texts(STAGE_STATES),
        "counts": texts(COUNTS),
        "causes": {cause.code: gettext(cause.user_message) for cause in all_causes()},
        "actions": texts(ACTIONS),
        "roles": texts(ROLES),
        "stageLine": str(STAGE_LINE),
        "announce": str(_("Status: %(state)s")),
        "searchableSince": str(SEARCHABLE_SINCE),
        "bytesKept": str(BYTES_KEPT),
        "bytesFreed": str(BYTES_FREED),
        "live": str(_("Live")),
        "reconnecting": str(_("Connection lost: checking every few seconds")),
        "stillWorking": str(_("Still working · last heartbeat %(seconds)s s ago")),
        "actionRefused": str(
            _("That did not work: the job changed in the meantime. Showing its current state.")
        ),
    }
