"""The byte quota under parallel uploads, on real PostgreSQL with real threads: two uploads that
each fit alone but not together cannot both pass, whatever the interleaving.

The forced interleaving holds each upload just after its final (locked) quota check until the
other one has made its own check, or for a few seconds when it cannot (because the lock keeps
it out, as it should). Without the lock both checks see the same usage and both uploads pass.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.db import connection

from documents.models import DocumentVersion, FileObject, Tenant
from documents.services import storage
from documents.services.files import FileInputError, file_create
from documents.services.storage import STORAGE_QUOTA_EXCEEDED, StorageQuotaExceeded, storage_used
from tests.conftest import race
from tests.documents.helpers import files_under, make_tenant, upload

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

DATA = b"x" * 1000


@pytest.fixture(autouse=True)
def media(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return Path(settings.MEDIA_ROOT)


@contextmanager
def held_after_final_check(module: str, parties: int) -> Iterator[None]:
    """Each caller of ``module.check_storage`` inside a transaction (the final check) waits there
    for the others to reach theirs; the wait ends after a few seconds when they cannot."""
    meet = threading.Barrier(parties)
    real = storage.check_storage

    def check_then_wait(tenant: Tenant, adding: int) -> None:
        real(tenant, adding)
        if connection.in_atomic_block:
            # Broken after the timeout: another upload is kept out by the lock, so proceed alone.
            with suppress(threading.BrokenBarrierError):
                meet.wait(timeout=3)

    with mock.patch(f"{module}.check_storage", check_then_wait):
        yield


def test_two_parallel_uploads_with_room_for_one_cannot_both_pass(media: Path) -> None:
    tenant = make_tenant(max_storage_bytes=len(DATA) * 3 // 2)

    with held_after_final_check("documents.services.upload", 2):
        results = race([lambda: upload(tenant, DATA, "a.txt"), lambda: upload(tenant, DATA, "b.txt")])

    refused = [r for r in results if isinstance(r, StorageQuotaExceeded)]
    passed = [r for r in results if not isinstance(r, Exception)]
    assert len(passed) == 1 and len(refused) == 1, results
    assert refused[0].code == STORAGE_QUOTA_EXCEEDED
    # The refused upload left nothing: one version, one stored file, usage within the limit.
    assert DocumentVersion.objects.count() == 1
    assert len(files_under(media)) == 1
    assert storage_used(tenant) == len(DATA)


def test_parallel_v1_file_uploads_with_room_for_one_cannot_both_pass(media: Path) -> None:
    tenant = make_tenant(max_storage_bytes=len(DATA) * 3 // 2)

    def create(name: str) -> Callable[[], FileObject]:
        return lambda: file_create(tenant=tenant, user=None, data=DATA, filename=name, purpose="assistants")

    with held_after_final_check("documents.services.files", 2):
        results = race([create("a.txt"), create("b.txt")])

    assert sum(isinstance(r, FileObject) for r in results) == 1, results
    assert sum(isinstance(r, FileInputError) and r.code == STORAGE_QUOTA_EXCEEDED for r in results) == 1
    assert FileObject.objects.count() == 1 and len(files_under(media)) == 1


def test_many_parallel_uploads_fill_the_quota_exactly(media: Path) -> None:
    tenant = make_tenant(max_storage_bytes=(len(DATA) + 1) * 3)  # three of the six files fit

    def one(i: int) -> Callable[[], Any]:
        return lambda: upload(tenant, DATA + str(i).encode(), f"{i}.txt")

    results = race([one(i) for i in range(6)])

    assert sum(not isinstance(r, Exception) for r in results) == 3, results
    assert sum(isinstance(r, StorageQuotaExceeded) for r in results) == 3
    assert DocumentVersion.objects.count() == 3 and len(files_under(media)) == 3
