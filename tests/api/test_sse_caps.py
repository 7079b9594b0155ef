"""Caps on event streams per user and in all, their maximum lifetime, and a bad Last-Event-ID
(docs/limits.md), on a real web server whose counts live in the shared cache."""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Iterator

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.core.cache import caches

from tests.api.conftest import Caller, Server, SSEStream, serving
from tests.api.test_sse import upload_over_http
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.cluster]
OpenStream = Callable[..., SSEStream]


@pytest.fixture(scope="module")
def capped_server(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(
        tmp_path_factory,
        SSE_KEEPALIVE_SECONDS="1",
        SSE_MAX_STREAMS_PER_USER="2",
        SSE_MAX_STREAMS="3",
        SSE_MAX_STREAM_SECONDS="3",
    ) as server:
        yield server


@pytest.fixture(autouse=True)
def fresh_counts() -> None:
    caches["throttle"].clear()


def refused(server: Server, caller: Caller, url: str, **headers: str) -> httpx.Response:
    with server.client(caller.token) as http:
        return http.get(url, headers={"Accept": "text/event-stream", **headers})


def test_streams_past_the_user_cap_and_the_global_cap_answer_429(
    capped_server: Server, alice: Caller, mallory: Caller, sse: OpenStream
) -> None:
    mine = upload_over_http(capped_server, alice)["events_url"]
    theirs = upload_over_http(capped_server, mallory)["events_url"]
    first = sse(capped_server, mine, alice.token)
    sse(capped_server, mine, alice.token)
    over_user = refused(capped_server, alice, mine)
    assert over_user.status_code == 429
    assert over_user.json()["error"]["code"] == "too_many_streams"
    # Another user is not held back by alice's cap, until the platform's is reached.
    sse(capped_server, theirs, mallory.token)
    assert refused(capped_server, mallory, theirs).status_code == 429
    # A closed stream gives its slot back.
    first.response.close()
    wait_for(
        lambda: int(caches["throttle"].get("sse:open:all", 0)) < 3,
        timeout=10,
        what="the closed stream's slot",
    )
    assert sse(capped_server, mine, alice.token).next_event() is not None


def test_a_stream_ends_after_its_lifetime_and_resumes_with_last_event_id(
    capped_server: Server, alice: Caller, sse: OpenStream
) -> None:
    url = upload_over_http(capped_server, alice)["events_url"]  # nobody runs this job
    stream = sse(capped_server, url, alice.token)
    first = stream.next_event()
    assert first is not None and first.id is not None
    events, _ = stream.rest(timeout=10)
    assert events == []
    resumed = sse(capped_server, url, alice.token, last_event_id=first.id)
    assert resumed.next_message() is not None  # open again; nothing was missed


@pytest.mark.parametrize("value", ["9" * 5_000, "12abc", "-5", "9" * 19])
def test_a_bad_last_event_id_answers_400(capped_server: Server, alice: Caller, value: str) -> None:
    url = upload_over_http(capped_server, alice)["events_url"]
    response = refused(capped_server, alice, url, **{"Last-Event-ID": value})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_last_event_id"


def _abort(server: Server, token: str, path: str, *, read_first: bool) -> None:
    """Send a stream request on a raw socket, then hang up (at once, or after the first bytes)."""
    url = httpx.URL(server.base_url)
    with socket.create_connection((url.host, url.port), timeout=10) as raw:
        raw.sendall(
            f"GET {path} HTTP/1.1\r\nHost: {url.host}\r\nAuthorization: Token {token}\r\n"
            "Accept: text/event-stream\r\n\r\n".encode()
        )
        if read_first:
            raw.recv(1)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # reset


def test_streams_aborted_before_or_after_the_first_byte_give_their_slots_back(
    capped_server: Server, alice: Caller, sse: OpenStream
) -> None:
    url = upload_over_http(capped_server, alice)["events_url"]
    path = httpx.URL(url).raw_path.decode()
    for n in range(24):  # twelve times the user's cap
        _abort(capped_server, alice.token, path, read_first=n % 2 == 1)

    def counts() -> tuple[int, int]:
        throttle = caches["throttle"]
        user = int(throttle.get(f"sse:open:user:{alice_id(alice)}", 0) or 0)
        return user, int(throttle.get("sse:open:all", 0) or 0)

    wait_for(lambda: counts() == (0, 0), timeout=20, what="every aborted stream's slot back")
    # not locked out: both of alice's streams open (a leaked slot answered 429 here)
    assert sse(capped_server, url, alice.token).next_event() is not None
    assert sse(capped_server, url, alice.token).next_event() is not None


def alice_id(caller: Caller) -> int:
    return int(get_user_model().objects.get(username=caller.username).pk)
