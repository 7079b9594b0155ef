"""OpenAPI additions drf-spectacular cannot infer: the async Server-Sent Events route; and each
route listed once although both trailing-slash forms are served."""

from __future__ import annotations

from typing import Any

EVENTS_PATH = "/api/documents/{document_id}/jobs/{job_id}/events"


def drop_slash_twins(endpoints: list[Any], **_kwargs: Any) -> list[Any]:
    """Preprocessing hook: keep the first of two endpoints that differ only by a trailing slash
    (the canonical form comes first in ``documents/api/urls.py``; its twin is appended)."""
    seen: set[tuple[str, str]] = set()
    kept = []
    for endpoint in endpoints:
        path, _regex, method = endpoint[0], endpoint[1], endpoint[2]
        key = (path.rstrip("/"), method)
        if key not in seen:
            seen.add(key)
            kept.append(endpoint)
    return kept


def add_event_stream(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """Postprocessing hook: document the job's event stream next to the JSON endpoints."""
    error = {"$ref": "#/components/schemas/ErrorOutEnvelope"}
    result.setdefault("paths", {})[EVENTS_PATH] = {
        "get": {
            "operationId": "documents_jobs_events",
            "summary": "Live status of a job as Server-Sent Events",
            "description": (
                "Each event has `id:` (the event log id), `event:` (`status` or `progress`) and "
                "`data:` (the JSON of the job status endpoint as of that event: `JobStatusOut`, see "
                "`x-event-data`). Without "
                "`Last-Event-ID` the stream opens with the current status; with it, it replays "
                "exactly the missed events. Keep-alive comments are sent while nothing happens; "
                "the stream ends after a terminal status (ready, cancelled, failed)."
            ),
            # What each event's ``data:`` holds (OpenAPI has no type for an event's payload):
            # the serializer that renders it (documents/api/output.py).
            "x-event-data": {"$ref": "#/components/schemas/JobStatusOut"},
            "tags": ["documents"],
            "parameters": [
                {"name": "document_id", "in": "path", "required": True, "schema": {"type": "string"}},
                {"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}},
                {
                    "name": "Last-Event-ID",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "integer", "minimum": 0, "maximum": 999_999_999_999_999_999},
                },
            ],
            "security": [{"tokenAuth": []}, {"cookieAuth": []}],
            "responses": {
                "200": {
                    "description": "The event stream",
                    "content": {"text/event-stream": {"schema": {"type": "string"}}},
                },
                **{
                    code: {"description": text, "content": {"application/json": {"schema": error}}}
                    for code, text in (
                        ("400", "Last-Event-ID is not an event id (invalid_last_event_id)"),
                        ("401", "Not authenticated"),
                        ("403", "No workspace"),
                        ("404", "Not found"),
                        ("429", "Too many open streams (too_many_streams)"),
                    )
                },
            },
        }
    }
    return result
