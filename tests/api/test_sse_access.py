"""An event stream stops telling a caller about a document they may no longer see, through a
real ASGI server (granian, as deployed) and a real HTTP client: access taken away while the
stream is open (the document's list changed, or the caller left the group on it) ends the
stream without sending another event, whether the job moves on or stays quiet. The read that
finds new events says whether the document is open to everyone, so that case costs no check."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from documents.api import sse
from documents.models import DocumentVersion
from documents.services.groups import membership_set_admin
from jobs.executor import run_stage
from jobs.services.worker import job_claim
from tests.api.conftest import TEXT, Caller, Server, SSEStream, state_of

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

OpenStream = Callable[..., SSEStream]


def user_id(caller: Caller) -> int:
    return int(get_user_model().objects.get(username=caller.username).pk)


def upload(server: Server, caller: Caller, access: str | None = None) -> dict[str, Any]:
    form = {"access": access} if access is not None else {}
    with server.client(caller.token) as http:
        answer = http.post("/api/documents/", files={"file": ("notes.txt", TEXT, "text/plain")}, data=form)
    assert answer.status_code == 201, answer.text
    body: dict[str, Any] = answer.json()
    return body


def restrict(server: Server, caller: Caller, document_id: str, principals: list[str]) -> None:
    with server.client(caller.token) as http:
        answer = http.put(
            f"/api/documents/{document_id}/access", json={"inherit": False, "principals": principals}
        )
    assert answer.status_code == 200, answer.text


def opened(stream: SSEStream) -> None:
    """The stream's first event (the current status) has arrived."""
    first = stream.next_event()
    assert first is not None and state_of(first) == "queued"


@pytest.fixture
def callers(make_caller: Any) -> tuple[Caller, Caller]:
    return make_caller("alice", "acme"), make_caller("bob", "acme")


def test_a_stream_ends_before_the_next_event_once_the_documents_list_leaves_the_caller_out(
    server: Server, callers: tuple[Caller, Caller], sse: OpenStream
):
    alice, bob = callers
    body = upload(server, alice)  # inherits the collection's list: everyone
    mine, theirs = sse(server, body["events_url"], alice.token), sse(server, body["events_url"], bob.token)
    opened(mine)
    opened(theirs)

    restrict(server, alice, body["document_id"], [f"user:{user_id(alice)}"])
    claim = job_claim(job_id=body["job_id"], worker="test-worker")
    assert claim is not None
    assert mine.events_until(lambda e: state_of(e) == "parsing")  # the job moved on: alice is told
    events, _ = theirs.rest(timeout=15)
    assert events == [] and theirs.closed  # bob is told nothing more, and the stream ends
    while claim is not None:
        claim = run_stage(claim)
    rest, _ = mine.rest(timeout=15)
    assert rest[-1].data is not None and rest[-1].data["state"] == "ready"


def test_a_quiet_stream_ends_once_the_caller_leaves_the_group_on_the_list(
    server: Server, callers: tuple[Caller, Caller], sse: OpenStream
):
    alice, bob = callers
    owner = get_user_model().objects.get(username=alice.username)
    membership_set_admin(membership=owner.memberships.get(), is_admin=True)  # she manages groups
    with server.client(alice.token) as http:
        group = http.post("/api/groups", json={"name": "Payroll"}).json()
        assert http.post(f"/api/groups/{group['id']}/members", json={"user_id": user_id(bob)}).is_success
    body = upload(server, alice, access=f"user:{user_id(alice)},{group['key']}")
    theirs = sse(server, body["events_url"], bob.token)
    opened(theirs)

    with server.client(alice.token) as http:
        assert http.delete(f"/api/groups/{group['id']}/members/{user_id(bob)}").is_success
    # Nobody runs the job: the stream ends on its own (a check each keep-alive period, 1 s here).
    events, _ = theirs.rest(timeout=15)
    assert events == [] and theirs.closed
    with server.client(bob.token) as http:
        assert http.get(body["events_url"]).status_code == 404  # reconnecting: as for a gone document


def test_the_read_that_finds_events_says_whether_the_document_is_open_to_everyone(
    callers: tuple[Caller, Caller],
):
    alice, _ = callers
    body = alice.uploaded()
    version_pk = DocumentVersion.objects.get(job_id=body["job_id"]).pk
    assert sse._events_after(version_pk, None).open_to_all
    answer = alice.client.put(
        f"/api/documents/{body['document_id']}/access",
        {"inherit": False, "principals": [f"user:{user_id(alice)}"]},
        format="json",
    )
    assert answer.status_code == 200, answer.content
    assert not sse._events_after(version_pk, None).open_to_all
