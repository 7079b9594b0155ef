"""One output contract: the status JSON a job shows is the same shape wherever it is sent.

The REST status endpoint, an SSE event (the current status and every replayed past one), the
JSON the document page embeds for its script, and the nested statuses of the document answers
must carry exactly the fields of ``JobStatusOut``, which is also what the OpenAPI schema
publishes; every URL in them must resolve to the route it names. A key added by hand in one
place, or a URL built by hand that stopped matching a route, fails here.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import AsyncClient
from django.urls import resolve
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from documents.api.output import DocumentDetailOut, ErrorBodyOut, JobStatusOut, ReindexOut, UploadOut
from documents.models import DocumentVersion
from jobs.models import JobEvent
from tests.pages import helpers as ph

pytestmark = pytest.mark.django_db(transaction=True)

STATUS_FIELDS = set(JobStatusOut().fields)
URL_ROUTES = {"status_url": "api-job", "events_url": "api-job-events"}


@pytest.fixture
def member(transactional_db: None) -> ph.Member:
    return ph.make_member("contract-user", "contract")


def api(member: ph.Member) -> APIClient:
    client = APIClient()
    client.force_authenticate(member.user)
    return client


def rest_status(member: ph.Member, result: ph.UploadResult) -> dict[str, Any]:
    answer = api(member).get(f"/api/documents/{result.document.pk}/jobs/{ph.job_id_of(result)}")
    assert answer.status_code == 200, answer.content
    body: dict[str, Any] = answer.json()
    return body


def page_status(member: ph.Member, result: ph.UploadResult) -> dict[str, Any]:
    page = ph.html(member.client.get(ph.detail_url(result)))
    found = re.search(r'<script id="job-status" type="application/json">(.*?)</script>', page, re.S)
    assert found is not None, "the page embeds no status"
    body: dict[str, Any] = json.loads(found.group(1))
    return body


async def _read_stream(client: AsyncClient, path: str, headers: dict[str, str]) -> str:
    response = await client.get(path, headers=headers)
    assert response.status_code == 200
    parts = [part async for part in response.streaming_content]  # type: ignore[attr-defined]
    return "".join(p.decode() if isinstance(p, bytes) else p for p in parts)


def sse_events(member: ph.Member, result: ph.UploadResult, last_id: int | None) -> list[dict[str, Any]]:
    """The events the stream sends to ``member`` (a finished job's stream ends by itself)."""
    from asgiref.sync import async_to_sync

    token = _token(member)
    headers = {"Authorization": f"Token {token}"}
    if last_id is not None:
        headers["Last-Event-ID"] = str(last_id)
    path = f"/api/documents/{result.document.pk}/jobs/{ph.job_id_of(result)}/events"
    text = async_to_sync(_read_stream)(AsyncClient(), path, headers)
    events = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in fields:
            events.append(
                {"id": int(fields["id"]), "event": fields["event"], "data": json.loads(fields["data"])}
            )
    return events


def _token(member: ph.Member) -> str:
    from rest_framework.authtoken.models import Token

    return str(Token.objects.get_or_create(user=member.user)[0].key)


def assert_urls_resolve(body: dict[str, Any]) -> None:
    for key, route in URL_ROUTES.items():
        match = resolve(body[key])
        assert match.url_name == route, (key, body[key])
        assert match.kwargs == {"document_id": body["document_id"], "job_id": body["job_id"]}


def test_the_schema_publishes_the_serializers_fields():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]
    assert set(components["JobStatusOut"]["properties"]) == STATUS_FIELDS
    assert set(components["ErrorBodyOut"]["properties"]) == set(ErrorBodyOut().fields)
    # The event stream's data is the same shape, said in the schema beside the route.
    events = schema["paths"]["/api/documents/{document_id}/jobs/{job_id}/events"]["get"]
    assert events["x-event-data"] == {"$ref": "#/components/schemas/JobStatusOut"}


@pytest.mark.parametrize("state", ["queued", "running", "failed", "ready"])
def test_rest_sse_and_page_send_the_serializers_status(member: ph.Member, state: str):
    make = {
        "queued": ph.queued,
        "running": lambda m: ph.running(m)[0],
        "failed": ph.failed_reupload,
        "ready": ph.ready,
    }[state]
    result = make(member)

    rest = rest_status(member, result)
    page = page_status(member, result)
    assert set(rest) == STATUS_FIELDS
    assert page == rest  # the same job, nothing changed in between: the same values too
    assert_urls_resolve(rest)
    if state == "ready":  # a finished job's stream ends, so it can be read to its end here
        opening = sse_events(member, result, None)
        assert [e["data"] for e in opening] == [rest]
    # The status endpoint the body names answers with the same body.
    assert api(member).get(rest["status_url"]).json() == rest


def test_replayed_events_are_the_serializers_status_as_of_each_event(member: ph.Member):
    result = ph.ready(member)
    rest = rest_status(member, result)
    events = sse_events(member, result, 0)

    rows = {row.id: row for row in JobEvent.objects.filter(job_id=ph.job_id_of(result))}
    assert [e["id"] for e in events] == sorted(rows)  # every event of the log, in order
    for event in events:
        data, row = event["data"], rows[event["id"]]
        assert set(data) == STATUS_FIELDS, event["id"]
        assert_urls_resolve(data)
        assert (data["status"], data["stage"], data["attempt"]) == (row.to_status, row.stage, row.attempt)
        assert data["updated_at"] == row.at.isoformat()
        if row.to_status != "ready":
            # Before the event that made it ready the version was neither finished nor published.
            assert data["published_at"] is None and data["finished_at"] is None, event["id"]
            assert data["progress"] is None or data["progress"] < 100
    assert events[-1]["data"] == rest  # the last event is the current status


def test_document_answers_nest_the_same_status_and_uploads_name_resolving_urls(member: ph.Member):
    result = ph.ready(member)
    rest = rest_status(member, result)
    client = api(member)

    detail = client.get(f"/api/documents/{result.document.pk}/").json()
    assert set(detail) == set(DocumentDetailOut().fields)
    assert detail["latest_job"] == rest
    assert [v["job"] for v in detail["versions"]] == [rest]
    listed = client.get("/api/documents/").json()["results"]
    assert [d["latest_job"] for d in listed] == [rest]

    upload = client.post(
        f"/api/documents/{result.document.pk}/versions/",
        {"file": SimpleUploadedFile("next.txt", b"A second version of the notes.\n", "text/plain")},
        format="multipart",
    )
    assert upload.status_code == 201, upload.content
    body = upload.json()
    assert set(body) == set(UploadOut().fields)
    assert_urls_resolve(body)
    version = DocumentVersion.objects.get(job_id=body["job_id"])
    assert body["version"] == version.number == 2


def test_errors_are_the_serializers_error_shape(member: ph.Member):
    missing = api(member).get("/api/documents/not-a-document/jobs/not-a-job")
    assert missing.status_code == 404
    assert set(missing.json()) == {"error"}
    assert set(missing.json()["error"]) <= set(ErrorBodyOut().fields)
    invalid = api(member).get("/api/documents/", {"state": "no-such-state"})
    assert invalid.status_code == 400
    assert set(invalid.json()["error"]) == set(ErrorBodyOut().fields)  # with its field errors


def test_the_reindex_status_is_its_serializers_shape_with_a_resolving_url(member: ph.Member):
    ph.ready(member)
    started = api(member).post("/api/reindex", {"embedder": "hashing:512"}, format="json")
    assert started.status_code == 202, started.content
    body = started.json()
    assert set(body) == set(ReindexOut().fields)
    schema = SchemaGenerator().get_schema(request=None, public=True)
    assert set(schema["components"]["schemas"]["ReindexOut"]["properties"]) == set(body)
    match = resolve(body["status_url"])
    assert (match.url_name, match.kwargs) == ("api-reindex-job", {"job_id": body["job_id"]})
    assert api(member).get(body["status_url"]).json() == body
