"""A job that finishes between the stream's two reads (the job row, then the event log).

The interleaving is forced in process, Saleor style: the stream's own ``job_status`` call runs
unchanged and is followed, right there, by the worker's real publish (``run_stage`` of the last
stage). In production a worker on another machine does the same whenever its commit falls into
that window. Either way the stream must deliver 'ready' and then end.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

from documents.api import notify, sse
from jobs.executor import run_stage
from tests.api.conftest import Caller, claim_at, event_ids

pytestmark = pytest.mark.django_db(transaction=True)


async def read_stream(
    token: str, url: str, last_event_id: int | None, seconds: float, language: str = ""
) -> tuple[bytes, bool]:
    """Everything the stream sends within ``seconds`` (asked in ``language``, if given), and
    whether it ended by itself."""
    headers = {"Authorization": f"Token {token}"}
    if language:
        headers["Accept-Language"] = language
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    response: Any = await AsyncClient().get(url, headers=headers)
    assert response.status_code == 200
    chunks = response.streaming_content.__aiter__()
    received = b""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    try:
        while True:
            try:
                chunk = await asyncio.wait_for(chunks.__anext__(), timeout=max(0.01, deadline - loop.time()))
            except StopAsyncIteration:
                return received, True
            except TimeoutError:
                return received, False
            received += chunk if isinstance(chunk, bytes) else chunk.encode()
    finally:
        await chunks.aclose()


def events_in(raw: bytes) -> list[dict[str, Any]]:
    out = []
    for block in raw.decode().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":"))
        if "event" in fields:
            out.append(
                {"id": int(fields["id"]), "event": fields["event"], "data": json.loads(fields["data"])}
            )
    return out


@pytest.mark.parametrize(
    "reconnect",
    [
        pytest.param(False, id="on-connect"),
        pytest.param(True, id="with-last-event-id"),
    ],
)
def test_a_job_that_finishes_between_the_streams_reads_still_ends_with_ready(
    alice: Caller, monkeypatch: pytest.MonkeyPatch, settings: Any, reconnect: bool
):
    settings.SSE_KEEPALIVE_SECONDS = 0.2
    # Poll instead of LISTEN: the wake-up path is not what this test is about, and no listener
    # task outlives the test's event loop.
    monkeypatch.setattr(notify, "uses_listen", lambda: False)
    body = alice.uploaded()
    last_stage = claim_at(body["job_id"], "indexing")
    last_seen = event_ids(body["job_id"])[-1]

    fired: list[bool] = []
    status_of = sse.job_status

    def status_then_the_worker_publishes(version: Any, job: Any = None) -> dict[str, Any]:
        status = status_of(version, job)
        if not fired:
            fired.append(True)
            assert run_stage(last_stage) is None  # publishes: the job is ready now
        return status

    monkeypatch.setattr(sse, "job_status", status_then_the_worker_publishes)

    raw, ended = async_to_sync(read_stream)(
        alice.token, body["events_url"], last_seen if reconnect else None, seconds=1.5
    )

    assert fired
    events = events_in(raw)
    assert events, raw
    assert [e["data"]["state"] for e in events][-1] == "ready", [
        (e["id"], e["data"]["state"]) for e in events
    ]
    assert ended, "the stream of a ready job is still open"
