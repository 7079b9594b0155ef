"""Fixtures for the REST API and SSE tests: API callers of a tenant, uploads, driving jobs, and a
real ASGI server (granian, as deployed) with a real HTTP client (httpx) for Server-Sent Events.

State is created through the services and the API itself (``user_create_in_tenant``,
``POST /api/documents/``, ``run_job``, ``job_claim``); nothing is inserted raw.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connections
from django.utils import timezone
from rest_framework.test import APIClient

from documents.services.accounts import user_create_in_tenant
from jobs.executor import run_job, run_stage
from jobs.models import Job, JobEvent, Status
from jobs.services.reaper import reap
from jobs.services.worker import Claim, job_claim
from tests.conftest import Processes, child_env, wait_for

logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per request is noise

# The status JSON of a job, exactly (the API, the SSE data and the pages share it).
STATUS_KEYS = {
    "bytes_freed_at",
    "bytes_kept_until",
    "job_id",
    "document_id",
    "version",
    "status",
    "stage",
    "stage_label",
    "state",
    "stage_index",
    "stage_count",
    "progress",
    "processed",
    "total",
    "unit",
    "attempt",
    "can_cancel",
    "can_retry",
    "can_process_again",
    "cancel_requested",
    "updated_at",
    "finished_at",
    "heartbeat_at",
    "published_at",
    "error",
    "stages",
    "status_url",
    "events_url",
}
ERROR_KEYS = {"code", "message", "retryable", "action"}
UPLOAD_KEYS = {"document_id", "version", "job_id", "duplicate", "reused_from", "status_url", "events_url"}
TEXT = b"Plain notes from the harbor.\nThe tide was high.\n\nSecond paragraph about amber falcons.\n"

# Text that must never reach an API client: tracebacks, source paths, SQL, hosts.
LEAK_MARKERS = (
    "Traceback",
    'File "',
    ".py",
    "/work/",
    "site-packages",
    "SELECT ",
    "INSERT ",
    "UPDATE ",
    "psycopg",
    "sqlite",
    "127.0.0.1",
    "localhost",
    "Exception",
    "Error:",
)


def assert_no_leak(body: bytes | str) -> None:
    text = body.decode(errors="replace") if isinstance(body, bytes) else body
    for marker in LEAK_MARKERS:
        assert marker not in text, f"{marker!r} leaked in {text[:500]!r}"


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    """The one error shape, with this status and code; returns the inner error object."""
    assert response.status_code == status, (response.status_code, response.content[:500])
    assert response["Content-Type"].startswith("application/json")
    body = json.loads(response.content)
    assert set(body) == {"error"}, body
    error = body["error"]
    assert {"code", "message"} <= set(error) <= {"code", "message", "detail"}, error
    assert error["code"] == code, error
    assert isinstance(error["message"], str)
    assert error["message"]
    assert_no_leak(response.content)
    return dict(error)


@dataclass
class Caller:
    """A user of one tenant with an API client authenticated by token."""

    username: str
    tenant: str
    token: str
    client: APIClient = field(repr=False)

    def upload(
        self, data: bytes, name: str = "notes.txt", *, title: str | None = None, document: str | None = None
    ) -> Any:
        form: dict[str, Any] = {"file": SimpleUploadedFile(name, data)}
        if title is not None:
            form["title"] = title
        url = f"/api/documents/{document}/versions/" if document else "/api/documents/"
        return self.client.post(url, form, format="multipart")

    def uploaded(self, data: bytes = TEXT, name: str = "notes.txt", **kwargs: Any) -> dict[str, Any]:
        """Upload and return the 201 answer."""
        response = self.upload(data, name, **kwargs)
        assert response.status_code == 201, response.content
        body: dict[str, Any] = response.json()
        return body


def state_of(event: SSEMessage) -> str:
    assert event.data is not None
    state: str = event.data["state"]
    return state


def token_client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


@pytest.fixture
def make_caller(db: None) -> Callable[[str, str], Caller]:
    def make(username: str, tenant: str) -> Caller:
        token = user_create_in_tenant(username=username, tenant_slug=tenant)
        return Caller(username=username, tenant=tenant, token=token, client=token_client(token))

    return make


@pytest.fixture
def alice(make_caller: Callable[[str, str], Caller]) -> Caller:
    return make_caller("alice", "acme")


@pytest.fixture
def mallory(make_caller: Callable[[str, str], Caller]) -> Caller:
    """A user of another tenant."""
    return make_caller("mallory", "globex")


@pytest.fixture
def loner(db: None) -> APIClient:
    """An authenticated user who belongs to no tenant."""
    from rest_framework.authtoken.models import Token

    user = get_user_model().objects.create_user(username="loner", password="pw")
    token, _ = Token.objects.get_or_create(user=user)
    return token_client(token.key)


def drive(job_id: Any, limit: int = 20) -> Job:
    """Run the job in this process until nothing is claimable (finished, or backing off)."""
    for _ in range(limit):
        if run_job(job_id) == "not claimed":
            return Job.objects.get(pk=job_id)
    raise AssertionError(f"job {job_id} still claimable after {limit} runs")


def claim_at(job_id: Any, stage: str) -> Claim:
    """Run the job's real stages in this process until ``stage`` is claimed (and not run)."""
    claim = job_claim(job_id=job_id, worker="test-worker")
    assert claim is not None
    while claim.job.stage != stage:
        next_claim = run_stage(claim)
        assert next_claim is not None, f"job stopped before {stage}"
        claim = next_claim
    return claim


def lose_the_worker_until_failed(job_id: Any) -> Job:
    """A stage whose worker dies on every attempt: the reaper stalls and recovers it until the
    attempt limit, then fails it as ``worker_lost`` (a cause the user may retry)."""
    for _ in range(10):
        job = Job.objects.get(pk=job_id)
        if job.status == Status.FAILED:
            return job
        assert job_claim(job_id=job_id, worker="doomed") is not None
        reap(now=timezone.now() + timedelta(hours=1))
    raise AssertionError("the reaper never gave up")


def event_ids(job_id: Any, after: int = 0) -> list[int]:
    return list(
        JobEvent.objects.filter(job_id=job_id, id__gt=after).order_by("id").values_list("id", flat=True)
    )


# --- a real ASGI server and a real SSE client -----------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Server:
    base_url: str
    processes: Processes

    def client(self, token: str | None = None, timeout: float = 10.0) -> httpx.Client:
        headers = {"Authorization": f"Token {token}"} if token else {}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)


WEB_WORKERS = 2  # web server processes of a test server


def start_server(processes: Processes, env: dict[str, str], **extra: str) -> Server:
    port = free_port()
    # As deployed: two granian workers on one port (manage.py serve_web).
    args = [
        "serve_web",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "2",
        "--graceful-seconds",
        "1",
    ]
    processes.manage("web", args, {**env, "DB_POOL": "1", **extra})  # pooled, as run_platform runs it
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(f"{base}/accounts/login/", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(up, timeout=90, interval=0.1, what="the web server to answer")  # a loaded machine
    except AssertionError:
        raise AssertionError(processes.logs()) from None
    return Server(base_url=base, processes=processes)


@pytest.fixture(scope="module")
def server(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One web server per test module, serving the project's ASGI application on the test database
    with 1 s keep-alives. It holds no state of its own: each test creates its data."""
    with serving(tmp_path_factory, SSE_KEEPALIVE_SECONDS="1") as started:
        yield started


@contextlib.contextmanager
def serving(tmp_path_factory: pytest.TempPathFactory, **env: str) -> Iterator[Server]:
    """A web server on the test database (``env``: settings for it) until the block ends: the body
    of a module's server fixture."""
    processes = Processes(tmp_path_factory.mktemp("web"))
    try:
        yield start_server(processes, child_env(**env))
    finally:
        processes.stop_all()
        connections.close_all()


@dataclass
class SSEMessage:
    """One SSE block: an event (``id``, ``event``, ``data``) or a comment (``comment``)."""

    id: int | None = None
    event: str | None = None
    data: dict[str, Any] | None = None
    comment: str | None = None
    retry: int | None = None


class SSEStream:
    """Reads an ``httpx`` streaming response block by block, with an overall deadline per read."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.iter_lines()
        self.closed = False

    def next_message(self) -> SSEMessage | None:
        """The next block, or None when the server closed the stream."""
        message = SSEMessage()
        seen = False
        for line in self._lines:
            if line == "":
                if seen:
                    return message
                continue
            seen = True
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "":
                message.comment = value
            elif name == "id":
                message.id = int(value)
            elif name == "event":
                message.event = value
            elif name == "data":
                message.data = json.loads(value)
            elif name == "retry":
                message.retry = int(value)
        self.closed = True
        return message if seen else None

    def next_event(self, timeout: float = 15.0) -> SSEMessage | None:
        """The next event (comments skipped), or None at the end of the stream."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = self.next_message()
            if message is None or message.event is not None:
                return message
        raise AssertionError(f"no event within {timeout}s")

    def events_until(
        self, predicate: Callable[[SSEMessage], bool], timeout: float = 15.0
    ) -> list[SSEMessage]:
        """Events up to and including the first for which ``predicate`` holds."""
        out: list[SSEMessage] = []
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, (
                f"timed out; got {[(e.id, e.event, e.data and e.data['state']) for e in out]}"
            )
            event = self.next_event(remaining)
            assert event is not None, f"stream closed early after {[e.id for e in out]}"
            out.append(event)
            if predicate(event):
                return out

    def rest(self, timeout: float = 15.0) -> tuple[list[SSEMessage], list[SSEMessage]]:
        """Everything until the server closes the stream: (events, comments). Fails on timeout."""
        events: list[SSEMessage] = []
        comments: list[SSEMessage] = []
        deadline = time.monotonic() + timeout
        while True:
            seen = [(e.id, e.data and e.data["state"]) for e in events]
            assert time.monotonic() < deadline, f"stream still open after {timeout}s; events {seen}"
            message = self.next_message()
            if message is None:
                return events, comments
            if message.event is not None:
                events.append(message)
            elif message.comment is not None:
                comments.append(message)


@pytest.fixture
def sse() -> Iterator[Callable[..., SSEStream]]:
    """Open SSE streams with httpx; all are closed at the end of the test."""
    opened: list[tuple[httpx.Client, Any]] = []

    def open_stream(
        server: Server, url: str, token: str | None, last_event_id: int | None = None
    ) -> SSEStream:
        client = server.client(token, timeout=10.0)
        headers = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        context = client.stream("GET", url, headers=headers)
        response = context.__enter__()
        opened.append((client, context))
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return SSEStream(response)

    yield open_stream
    for client, context in opened:
        try:
            context.__exit__(None, None, None)
        finally:
            client.close()
