"""Keyset cursors of the /v1 lists (``after``/``before``/``limit``/``order``), as OpenAI's.

The cursor is an object id; the page continues from that object's (created_at, id) position,
so pages stay stable while objects are added and cost an index range scan, never an offset.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import Model, Q, QuerySet

from documents.api_v1.errors import V1Error

MAX_LIMIT = 100


def _limit(raw: str | None) -> int:
    if raw in (None, ""):
        return 20
    try:
        value = int(str(raw))
    except ValueError:
        raise V1Error(400, "invalid_limit", "limit must be an integer from 1 to 100.", "limit") from None
    if not 1 <= value <= MAX_LIMIT:
        raise V1Error(400, "invalid_limit", "limit must be an integer from 1 to 100.", "limit")
    return value


def keyset_page(
    queryset: QuerySet[Any],
    params: Any,
    render: Callable[[Any], dict[str, Any]],
    cursor: Callable[[str], Q] = lambda value: Q(pk=value),
) -> dict[str, Any]:
    """One page of ``queryset`` (a tenant's objects with ``created_at`` and ``id``) as an OpenAI
    list: ``{"object": "list", "data", "first_id", "last_id", "has_more"}``. ``cursor`` turns a
    public id (the ``after``/``before`` value) into the condition finding its row."""
    limit = _limit(params.get("limit"))
    order = params.get("order") or "desc"
    if order not in ("asc", "desc"):
        raise V1Error(400, "invalid_order", "order must be 'asc' or 'desc'.", "order")
    after, before = params.get("after"), params.get("before")
    forward = not before  # 'before' pages backwards from the cursor, then is shown in order
    descending = (order == "desc") == forward
    if after or before:
        anchor = queryset.select_related(None).filter(cursor(str(after or before)))
        found: Model | None = anchor.only("pk", "created_at").first()
        if found is None:
            param = "after" if after else "before"
            raise V1Error(400, "invalid_cursor", f"{param} is not an id of this list.", param)
        at, pk = found.created_at, found.pk  # type: ignore[attr-defined]
        if descending:
            queryset = queryset.filter(Q(created_at__lt=at) | Q(created_at=at, pk__lt=pk))
        else:
            queryset = queryset.filter(Q(created_at__gt=at) | Q(created_at=at, pk__gt=pk))
    ordering = ("-created_at", "-pk") if descending else ("created_at", "pk")
    rows = list(queryset.order_by(*ordering)[: limit + 1])
    has_more = len(rows) > limit
    rows = rows[:limit]
    if not forward:
        rows.reverse()
    data = [render(row) for row in rows]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": has_more,
    }
