"""SSE subscribers of one job share one read per wake, and never join a read that started
before they were woken (it may predate the commit that woke them)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import connections

from documents.api import sse
from documents.models import DocumentVersion
from jobs.executor import run_stage
from jobs.services.worker import job_claim
from tests.api.conftest import Caller, event_ids
from tests.conftest import wait_for_async

pytestmark = pytest.mark.django_db(transaction=True)


def counting_reads(monkeypatch: pytest.MonkeyPatch, gate: threading.Event | None = None) -> list[Any]:
    calls: list[Any] = []
    original = sse._events_after

    def read(version_pk: Any, last_id: int | None) -> Any:
        calls.append(last_id)
        if gate is not None:
            gate.wait(5)
        return original(version_pk, last_id)

    monkeypatch.setattr(sse, "_events_after", read)
    return calls


def held_reads(alice: Caller, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, threading.Event, list[Any]]:
    """A fresh upload's version, and its reads counted and held until the gate opens."""
    body = alice.uploaded()
    gate = threading.Event()
    return DocumentVersion.objects.get(job_id=body["job_id"]).pk, gate, counting_reads(monkeypatch, gate)


def test_subscribers_woken_together_share_one_read_and_its_rendering(alice: Caller, monkeypatch):
    body = alice.uploaded()
    version_pk = DocumentVersion.objects.get(job_id=body["job_id"]).pk
    last = 0  # a reconnect that missed every event: a replay of the whole log
    calls = counting_reads(monkeypatch)

    async def thousand_wake() -> list[Any]:
        reads = sse.SharedReads()
        return await asyncio.gather(*(reads.read(version_pk, last) for _ in range(200)))

    results = async_to_sync(thousand_wake)()
    assert calls == [last]
    events, done, _ = results[0]
    assert [event_id for event_id, _ in events] == event_ids(body["job_id"]) and not done
    assert all(result == results[0] for result in results)
    assert events[0][1].startswith(f"id: {events[0][0]}\nevent: ")


def test_a_subscriber_woken_after_a_read_started_reads_again(alice: Caller, monkeypatch):
    version_pk, gate, calls = held_reads(alice, monkeypatch)

    async def late_wake() -> None:
        reads = sse.SharedReads()
        first = asyncio.ensure_future(reads.read(version_pk, None))
        await wait_for_async(lambda: calls, what="the first read running in its thread")
        second = asyncio.ensure_future(reads.read(version_pk, None))
        # One turn of the loop: the newcomer's read() runs up to its wait, while the first read
        # is still held. The reads run one at a time on the thread they share (as in the server),
        # so the newcomer's own read starts only once the gate lets the first one end.
        await asyncio.sleep(0)
        assert not second.done() and len(calls) == 1
        gate.set()
        await asyncio.gather(first, second)

    async_to_sync(late_wake)()
    assert calls == [None, None]


def test_a_subscriber_that_leaves_does_not_cancel_the_read_of_the_others(alice: Caller, monkeypatch):
    version_pk, gate, calls = held_reads(alice, monkeypatch)

    async def one_leaves() -> Any:
        reads = sse.SharedReads()
        leaving = asyncio.ensure_future(reads.read(version_pk, None))
        staying = asyncio.ensure_future(reads.read(version_pk, None))
        await wait_for_async(lambda: calls, what="the shared read running in its thread")
        leaving.cancel()
        gate.set()
        return await staying

    events, _, _ = async_to_sync(one_leaves)()
    assert len(calls) == 1 and len(events) == 1


def test_a_publish_committing_during_a_read_never_goes_out_with_older_facts(alice: Caller, monkeypatch):
    # The job runs up to its last stage; the publish then commits from another connection in the
    # middle of a stream's read (right after the read took the job's status), as a worker would.
    body = alice.uploaded()
    version_pk = DocumentVersion.objects.get(job_id=body["job_id"]).pk
    claim = job_claim(job_id=body["job_id"], worker="test-worker")
    while claim is not None and claim.job.stage != "indexing":
        claim = run_stage(claim)
    assert claim is not None
    last = event_ids(body["job_id"])[-1]
    original = sse.job_status
    published: list[bool] = []

    def publish_elsewhere() -> None:
        run_stage(claim)
        connections.close_all()

    def status_then_publish(*args: Any, **kwargs: Any) -> Any:
        answer = original(*args, **kwargs)
        if not published:
            published.append(True)
            worker = threading.Thread(target=publish_elsewhere)
            worker.start()
            worker.join()
        return answer

    monkeypatch.setattr(sse, "job_status", status_then_publish)
    sent: list[tuple[int, str]] = []
    done = False
    while not done:
        events, done, _ = sse._events_after(version_pk, last)
        sent += events
        last = events[-1][0] if events else last
    assert published
    final = json.loads(sent[-1][1].split("data: ", 1)[1])
    status = alice.client.get(body["status_url"]).json()
    assert final["state"] == status["state"] == "ready"
    assert final["finished_at"] == status["finished_at"] is not None
    assert final["published_at"] == status["published_at"] is not None
