"""A concurrency bound per external provider shared by every worker process, kept in the database.

Each provider has ``max_concurrency`` slot rows; a caller takes a free (or expired) slot with a
compare-and-set and gives it back when done. A crashed holder's slot frees itself when its hold
expires. Works on SQLite and PostgreSQL without another service.
"""

from __future__ import annotations

import contextlib
import random
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.db import IntegrityError
from django.db.models import Q
from django.utils import timezone

from documents.causes import EMBEDDING_RATE_LIMITED
from documents.models import ProviderSlot
from jobs.errors import StageFailure


class DatabaseLimiter:
    def __init__(
        self,
        max_concurrency: int,
        *,
        wait_seconds: float = 30.0,
        hold_seconds: float = 300.0,
        retry_after: float = 5.0,
    ) -> None:
        self.max_concurrency = max(1, max_concurrency)
        self.wait_seconds = wait_seconds
        self.hold_seconds = hold_seconds
        self.retry_after = retry_after

    def _ensure_slots(self, provider: str) -> None:
        existing = set(ProviderSlot.objects.filter(provider=provider).values_list("number", flat=True))
        for number in range(self.max_concurrency):
            if number not in existing:
                with contextlib.suppress(IntegrityError):  # another process created it first
                    ProviderSlot.objects.create(provider=provider, number=number)

    def _try_take(self, provider: str, holder: str) -> int | None:
        now = timezone.now()
        free = Q(holder="") | Q(expires_at__lt=now)
        candidates = ProviderSlot.objects.filter(free, provider=provider, number__lt=self.max_concurrency)
        for pk in candidates.values_list("pk", flat=True):
            # Compare-and-set: only one caller turns a free slot into its own.
            taken = ProviderSlot.objects.filter(free, pk=pk).update(
                holder=holder, expires_at=now + timedelta(seconds=self.hold_seconds)
            )
            if taken:
                return int(pk)
        return None

    @contextmanager
    def slot(self, provider_key: str) -> Iterator[None]:
        """Hold one of the provider's slots; raise ``embedding_rate_limited`` after waiting too long."""
        self._ensure_slots(provider_key)
        holder = uuid.uuid4().hex
        deadline = time.monotonic() + self.wait_seconds
        while (pk := self._try_take(provider_key, holder)) is None:
            if time.monotonic() > deadline:
                raise StageFailure(
                    EMBEDDING_RATE_LIMITED.code,
                    f"all {self.max_concurrency} slots for the provider stayed busy",
                    retry_after=self.retry_after,
                )
            time.sleep(random.uniform(0.02, 0.1))
        try:
            yield
        finally:
            ProviderSlot.objects.filter(pk=pk, holder=holder).update(holder="", expires_at=None)
