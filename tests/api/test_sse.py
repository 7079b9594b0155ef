"""Server-Sent Events through a real ASGI server (granian, as deployed) and a real HTTP client (httpx).

The job is driven from this process with the engine's services where the test needs exact
control (``job_claim`` + ``run_stage``), or by a real ``qcluster`` process. The event log
(``JobEvent``) is the truth the stream is checked against.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from rest_framework.authtoken.models import Token

from jobs.executor import run_stage
from jobs.models import JobEvent
from jobs.services.worker import job_claim
from tests.api.conftest import (
    STATUS_KEYS,
    TEXT,
    WEB_WORKERS,
    Caller,
    Server,
    SSEMessage,
    SSEStream,
    claim_at,
    drive,
    event_ids,
    state_of,
)
from tests.conftest import Processes
from tests.timing import hold_for

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

OpenStream = Callable[..., SSEStream]
FINAL = {"ready", "cancelled", "failed"}


def upload_over_http(server: Server, caller: Caller, data: bytes = TEXT) -> dict[str, Any]:
    with server.client(caller.token) as http:
        response = http.post("/api/documents/", files={"file": ("notes.txt", data, "text/plain")})
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def status_over_http(server: Server, caller: Caller, url: str) -> dict[str, Any]:
    with server.client(caller.token) as http:
        response = http.get(url)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def check_against_the_log(job_id: str, events: list[SSEMessage]) -> None:
    """Ids strictly increase; each event's name and data agree with its event log row."""
    ids = [e.id for e in events if e.id is not None]
    assert ids == sorted(set(ids)), ids
    assert len(ids) == len(events)
    rows = {row.id: row for row in JobEvent.objects.filter(job_id=job_id, id__in=ids)}
    assert set(rows) == set(ids)
    for event in events:
        assert event.data is not None
        assert set(event.data) == STATUS_KEYS
        assert event.data["job_id"] == job_id
        assert event.id is not None
        row = rows[event.id]
        assert event.event == ("progress" if row.kind == JobEvent.Kind.PROGRESS else "status")
        assert (event.data["status"], event.data["stage"]) == (row.to_status, row.stage), event.id


def test_events_arrive_as_the_job_advances_and_the_stream_ends_after_ready(
    server: Server, alice: Caller, sse: OpenStream
):
    body = upload_over_http(server, alice)
    job_id = body["job_id"]
    stream = sse(server, body["events_url"], alice.token)

    assert stream.next_message() == SSEMessage(retry=2000)
    first = stream.next_event()
    assert first is not None
    # On connect: the current status, under the id of the latest event.
    assert (first.id, first.event) == (event_ids(job_id)[-1], "status")
    assert first.data == status_over_http(server, alice, body["status_url"])
    assert first.data["state"] == "queued"

    events = [first]
    claim = job_claim(job_id=job_id, worker="test-worker")
    assert claim is not None
    while claim is not None:
        stage = claim.job.stage
        # Each claim is seen on the stream before the stage runs: events are live, not replayed.
        events += stream.events_until(lambda e, s=stage: state_of(e) == s)  # type: ignore[misc]
        claim = run_stage(claim)
    rest, _ = stream.rest(timeout=15)
    events += rest

    assert stream.closed
    assert events[-1].data is not None
    assert events[-1].data["state"] == "ready"
    # Connected throughout: every event since the first, exactly once.
    assert [e.id for e in events] == [first.id, *event_ids(job_id, after=first.id or 0)]
    check_against_the_log(job_id, events)
    states = [e.data["state"] for e in events if e.data]
    for state in ("queued", "parsing", "chunking", "embedding", "indexing", "ready"):
        assert state in states
    assert "ocr" not in states  # a text file needs no OCR: decided before the stage could show as running
    assert (
        states.index("parsing") < states.index("chunking") < states.index("indexing") < states.index("ready")
    )
    # A client that only polls sees the same final state.
    assert status_over_http(server, alice, body["status_url"]) == events[-1].data


def test_keep_alive_comments_flow_while_nothing_happens(server: Server, alice: Caller, sse: OpenStream):
    body = upload_over_http(server, alice)  # nobody runs this job
    stream = sse(server, body["events_url"], alice.token)
    first = stream.next_event()
    assert first is not None
    assert first.data is not None
    assert first.data["state"] == "queued"

    comments: list[SSEMessage] = []
    events: list[SSEMessage] = []
    started = time.monotonic()
    while time.monotonic() - started < 2.6:
        message = stream.next_message()
        assert message is not None, "the stream closed"
        (comments if message.comment is not None else events).append(message)

    assert events == []
    assert len(comments) >= 2
    assert {c.comment for c in comments} == {"keep-alive"}


def test_a_reconnect_with_last_event_id_receives_exactly_the_missed_events(
    server: Server, alice: Caller, sse: OpenStream
):
    body = upload_over_http(server, alice)
    job_id = body["job_id"]
    stream = sse(server, body["events_url"], alice.token)
    claim = job_claim(job_id=job_id, worker="test-worker")
    assert claim is not None
    seen = stream.events_until(lambda e: state_of(e) == "parsing")
    stream.response.close()  # the client goes away mid-job
    last = seen[-1].id
    assert last is not None

    # While it is away the job runs two stages (parsing passes over OCR, a text file needs none)
    # and claims the next.
    claim = run_stage(claim)
    assert claim is not None
    claim = run_stage(claim)
    assert claim is not None
    assert claim.job.stage == "embedding"
    missed = event_ids(job_id, after=last)
    assert len(missed) >= 2  # the two stage changes, and any progress reported meanwhile

    again = sse(server, body["events_url"], alice.token, last_event_id=last)
    replayed = again.events_until(lambda e: e.id == missed[-1], timeout=10)
    assert [e.id for e in replayed] == missed  # exactly the missed ones, none twice, none left out

    # Then it stays live until the end.
    while claim is not None:
        claim = run_stage(claim)
    rest, _ = again.rest(timeout=15)
    received = replayed + rest
    assert [e.id for e in received] == event_ids(job_id, after=last)
    assert received[-1].data is not None
    assert received[-1].data["state"] == "ready"
    check_against_the_log(job_id, received)


def test_a_reconnect_after_the_job_finished_replays_the_rest_and_ends(
    server: Server, alice: Caller, sse: OpenStream
):
    body = upload_over_http(server, alice)
    drive(body["job_id"])
    ids = event_ids(body["job_id"])
    last = ids[len(ids) // 2]

    events, _ = sse(server, body["events_url"], alice.token, last_event_id=last).rest(timeout=10)

    assert [e.id for e in events] == [i for i in ids if i > last]
    assert events[-1].data == status_over_http(server, alice, body["status_url"])
    check_against_the_log(body["job_id"], events)


def test_replayed_events_carry_the_status_as_of_that_event(server: Server, alice: Caller, sse: OpenStream):
    body = upload_over_http(server, alice)
    drive(body["job_id"])
    first = event_ids(body["job_id"])[0]

    events, _ = sse(server, body["events_url"], alice.token, last_event_id=first).rest(timeout=10)

    assert state_of(events[-1]) == "ready"
    for event in events[:-1]:
        assert event.data is not None
        assert (event.id, event.data["published_at"], event.data["finished_at"]) == (event.id, None, None)


def test_a_stream_opened_on_a_finished_job_sends_its_status_and_ends(
    server: Server, alice: Caller, sse: OpenStream
):
    body = upload_over_http(server, alice)
    drive(body["job_id"])
    events, _ = sse(server, body["events_url"], alice.token).rest(timeout=10)
    assert [(e.id, e.event) for e in events] == [(event_ids(body["job_id"])[-1], "status")]
    assert events[0].data == status_over_http(server, alice, body["status_url"])


def test_a_reconnect_after_the_final_event_ends_at_once(server: Server, alice: Caller, sse: OpenStream):
    # Browsers' EventSource reconnects like this after the server closes a finished stream.
    body = upload_over_http(server, alice)
    drive(body["job_id"])
    last = event_ids(body["job_id"])[-1]
    events, _ = sse(server, body["events_url"], alice.token, last_event_id=last).rest(timeout=2.5)
    assert events == []


def test_a_cluster_runs_the_job_and_stream_and_poller_agree_on_the_end(
    server: Server, processes: Processes, subprocess_env: dict[str, str], alice: Caller, sse: OpenStream
):
    body = upload_over_http(server, alice)
    stream = sse(server, body["events_url"], alice.token)
    first = stream.next_event()
    assert first is not None
    assert first.data is not None
    assert first.data["state"] == "queued"

    polled: list[dict[str, Any]] = []

    def poll() -> None:
        deadline = time.monotonic() + 60
        with server.client(alice.token) as http:
            while time.monotonic() < deadline:
                polled.append(http.get(body["status_url"]).json())
                if polled[-1]["status"] in FINAL:
                    return
                hold_for(0.05)  # a frontend polling every 50 ms

    poller = threading.Thread(target=poll)
    poller.start()
    processes.manage("qcluster", ["qcluster"], subprocess_env)
    try:
        events, _ = stream.rest(timeout=60)
    except AssertionError:
        raise AssertionError(processes.logs() + server.processes.logs()) from None
    poller.join(timeout=65)

    assert events[-1].data is not None
    assert events[-1].data["state"] == "ready"
    check_against_the_log(body["job_id"], [first, *events])
    assert polled[-1] == events[-1].data
    with server.client(alice.token) as http:
        hits = http.get("/api/search", params={"q": "harbor tide"}).json()["results"]
    assert [h["document_id"] for h in hits] == [body["document_id"]]


def test_the_events_route_answers_404_401_403_like_the_rest_of_the_api(
    server: Server, alice: Caller, mallory: Caller, loner: Any, sse: OpenStream
):
    body = upload_over_http(server, alice)
    unknown = f"/api/documents/{body['document_id']}/jobs/7f9e8d7c-6b5a-4a3b-9c2d-1e0f2a3b4c5d/events"
    random = (
        "/api/documents/0d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a/jobs/7f9e8d7c-6b5a-4a3b-9c2d-1e0f2a3b4c5d/events"
    )

    with server.client(mallory.token) as http:
        theirs = http.get(body["events_url"])
        assert theirs.status_code == 404
        assert theirs.json() == {"error": {"code": "not_found", "message": "Not found."}}
        for url in (unknown, random, "/api/documents/x/jobs/y/events"):
            other = http.get(url)
            assert (other.status_code, other.content) == (404, theirs.content)
    with server.client() as http:
        anonymous = http.get(body["events_url"])
        assert anonymous.status_code == 401
        assert anonymous.json()["error"]["code"] == "not_authenticated"
        bad = http.get(body["events_url"], headers={"Authorization": "Token " + "0" * 40})
        assert bad.status_code == 401
        assert bad.json()["error"]["message"] == "The token is not valid: it is wrong or was revoked."
        # The Bearer scheme is taken as the rest of the API takes it.
        with http.stream(
            "GET", body["events_url"], headers={"Authorization": f"Bearer {alice.token}"}
        ) as bearer:
            assert bearer.status_code == 200
    loner_token = Token.objects.get(user__username="loner").key
    with server.client(loner_token) as http:
        forbidden = http.get(body["events_url"])
        assert forbidden.status_code == 403
        assert forbidden.json()["error"]["code"] == "permission_denied"

    # A browser session (cookie) works as well as a token.
    browser = Client()
    browser.force_login(get_user_model().objects.get(username="alice"))
    session = browser.cookies["sessionid"].value
    with (
        httpx.Client(base_url=server.base_url, cookies={"sessionid": session}, timeout=10) as http,
        http.stream("GET", body["events_url"]) as response,
    ):
        assert response.status_code == 200
        event = SSEStream(response).next_event()
        assert event is not None
        assert event.data is not None
        assert event.data["job_id"] == body["job_id"]


# --- PostgreSQL: one LISTEN connection per process, whatever the number of streams ----------------


def server_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        (count,) = cursor.fetchone()
    return int(count)


def listen_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND query ILIKE 'LISTEN %%'"
        )
        (count,) = cursor.fetchone()
    return int(count)


def open_streams(server: Server, caller: Caller, url: str, sse: OpenStream, count: int) -> list[SSEStream]:
    streams = []
    for _ in range(count):
        stream = sse(server, url, caller.token)
        assert stream.next_event() is not None
        streams.append(stream)
    hold_for(1.5)  # every stream has polled / waited at least once more
    return streams


@pytest.mark.postgres
def test_thirty_streams_share_one_listen_connection_per_process(
    server: Server, alice: Caller, sse: OpenStream
):
    body = upload_over_http(server, alice)
    streams = open_streams(server, alice, body["events_url"], sse, 30)
    assert 1 <= listen_connections() <= WEB_WORKERS
    # All thirty are woken by the one listener when the job moves.
    claim_at(body["job_id"], "parsing")
    for stream in streams:
        stream.events_until(lambda e: state_of(e) == "parsing", timeout=10)


@pytest.mark.postgres
def test_database_connections_do_not_grow_with_the_number_of_streams(
    server: Server, alice: Caller, sse: OpenStream
):
    body = upload_over_http(server, alice)
    open_streams(server, alice, body["events_url"], sse, 1)
    one = server_connections()
    open_streams(server, alice, body["events_url"], sse, 29)
    thirty = server_connections()
    assert thirty - one <= 3, (one, thirty)
