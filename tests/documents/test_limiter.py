"""The database-backed provider limiter under real concurrency (threads, each with its own
PostgreSQL connection): the bound holds, a crashed holder's slot expires, a waiter gives up."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from documents.limiter import DatabaseLimiter
from documents.models import ProviderSlot
from jobs.errors import StageFailure
from tests.timing import hold_for

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

PROVIDER = "http://127.0.0.1:9/v1"


class Holders:
    """Counts the callers inside a slot at the same moment, and the most ever seen."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0
        self.entered = 0

    def hold(self, seconds: float) -> None:
        with self.lock:
            self.now += 1
            self.entered += 1
            self.most = max(self.most, self.now)
        hold_for(seconds)  # a call in flight
        with self.lock:
            self.now -= 1


def in_threads(count: int, work: Callable[[], Any]) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(count)

    def run() -> None:
        try:
            start.wait()
            work()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(t.is_alive() for t in threads)
    return errors


def test_concurrent_holders_never_exceed_the_limit():
    limiter = DatabaseLimiter(2, wait_seconds=20, hold_seconds=60)
    holders = Holders()

    def work() -> None:
        for _ in range(2):
            with limiter.slot(PROVIDER):
                holders.hold(0.15)

    errors = in_threads(6, work)

    assert errors == []
    assert holders.entered == 12
    # Bounded, and really concurrent up to the bound (not serialised to one).
    assert holders.most == 2
    assert ProviderSlot.objects.filter(provider=PROVIDER).count() == 2
    assert not ProviderSlot.objects.filter(provider=PROVIDER).exclude(holder="").exists()


def test_a_holder_that_never_releases_frees_its_slot_when_the_hold_expires():
    limiter = DatabaseLimiter(1, wait_seconds=10, hold_seconds=1)
    crashed = limiter.slot(PROVIDER)
    crashed.__enter__()  # taken and never given back, as by a worker that died
    started = time.monotonic()

    with limiter.slot(PROVIDER):
        waited = time.monotonic() - started
        assert 0.8 <= waited < 5, waited
        # The crashed holder's late release must not free the slot the new holder has now.
        crashed.__exit__(None, None, None)
        impatient = DatabaseLimiter(1, wait_seconds=0.3, hold_seconds=1)
        with pytest.raises(StageFailure), impatient.slot(PROVIDER):
            pass


def test_a_waiter_past_its_wait_gets_rate_limited_with_retry_after() -> None:
    holder = DatabaseLimiter(1, wait_seconds=5, hold_seconds=60)
    waiter = DatabaseLimiter(1, wait_seconds=0.4, hold_seconds=60, retry_after=7)
    taken = threading.Event()
    done = threading.Event()

    def hold() -> None:
        with holder.slot(PROVIDER):
            taken.set()
            done.wait(10)

    errors: list[BaseException] = []
    thread = threading.Thread(target=lambda: in_threads(1, hold))
    thread.start()
    try:
        assert taken.wait(10)
        started = time.monotonic()
        try:
            with waiter.slot(PROVIDER):
                pytest.fail("the waiter got a slot that was held")
        except StageFailure as exc:
            errors.append(exc)
        waited = time.monotonic() - started
    finally:
        done.set()
        thread.join(10)

    [failure] = errors
    assert isinstance(failure, StageFailure)
    assert (failure.cause, failure.retry_after) == ("embedding_rate_limited", 7)
    assert 0.4 <= waited < 3, waited
    # Once the holder is gone the slot is free again.
    with waiter.slot(PROVIDER):
        assert ProviderSlot.objects.filter(provider=PROVIDER).exclude(holder="").count() == 1
