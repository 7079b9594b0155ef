"""The access lists reject whole documents before their entries and vectors are read: on SQLite
a meaning search for a member who may see one document of ten does a small share of the work of
the same search unfiltered (counted in SQLite's own virtual-machine steps). It tested the grant
once per entry instead, after reading every entry of the workspace: 15x slower at 100,000
chunks with 1% visible (bench/permissions.py). SQLite then ranks the scope's vectors before
reading any entry, and only the nearest ones' entries are read."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from django.db import connection

from documents.embedders import configured_embedder
from documents.models import IndexEntry
from documents.retrieval.backends import Scope
from documents.retrieval.index import search_index
from documents.services.upload import document_upload
from jobs.models import Status
from tests.documents.access_helpers import member, tenant_of, viewer
from tests.documents.helpers import run_until_idle

pytestmark = pytest.mark.django_db

WORDS = ["harbour", "tide", "ledger", "lantern", "orchard", "falcon", "copper", "meadow", "granite", "signal"]


def long_text(seed: int) -> str:
    rng = np.random.default_rng(seed)
    return "\n\n".join(" ".join(rng.choice(WORDS, 120)) for _ in range(25))


def vm_steps(run: Any) -> int:
    """SQLite virtual-machine steps (in hundreds) that ``run`` takes."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    connection.ensure_connection()
    raw = connection.connection
    raw.set_progress_handler(count, 100)
    try:
        run()
    finally:
        raw.set_progress_handler(None, 100)
    return steps[0]


def published(user: Any, name: str, seed: int, access: list[str]) -> Any:
    result = document_upload(
        tenant=tenant_of(user),
        data=long_text(seed).encode(),
        filename=f"{name}.txt",
        title=name,
        access=access,
    )
    assert result.job is not None and run_until_idle(result.job.pk).status == Status.READY
    return result.document.pk


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's plan and step counter")
def test_a_selective_access_list_reads_only_the_visible_documents_entries(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    alice, bob = member("alice"), member("bob")
    shared = published(bob, "shared", 0, ["everyone"])
    for n in range(1, 10):
        published(alice, f"private {n}", n, [f"user:{alice.pk}"])
    embedder = configured_embedder()
    query = np.asarray(embedder.embed(["harbour tide ledger"])[0], dtype=np.float32)
    tenant_id = tenant_of(bob).pk
    whole = Scope(tenant_id=tenant_id, embedder=embedder.name)
    bobs = Scope(tenant_id=tenant_id, embedder=embedder.name, principals=viewer(bob).principals)
    assert len(search_index().dense(bobs, query, 10, tokens=[])) == 10  # the shared one's chunks

    unfiltered = vm_steps(lambda: search_index().dense(whole, query, 10, tokens=[]))
    filtered = vm_steps(lambda: search_index().dense(bobs, query, 10, tokens=[]))
    one = Scope(tenant_id=tenant_id, embedder=embedder.name, document_ids=[shared])
    alone = vm_steps(lambda: search_index().dense(one, query, 10, tokens=[]))
    # The visible document's vectors and its grant's check, not the others' vectors.
    assert filtered <= 2 * alone, (filtered, alone)
    assert filtered < unfiltered / 2, (filtered, unfiltered)


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's dense plan")
def test_a_vector_without_its_entry_is_passed_over_and_the_search_still_gets_k_hits(settings, tmp_path):
    # SQLite ranks the scope's vectors first and reads only the nearest ones' entries; a vector
    # whose entry is missing must not cost the caller a hit (the entry-by-entry plan answers).
    settings.MEDIA_ROOT = tmp_path / "media"
    bob = member("bob")
    published(bob, "one", 1, ["everyone"])
    published(bob, "two", 2, ["everyone"])
    embedder = configured_embedder()
    query = np.asarray(embedder.embed(["harbour tide ledger"])[0], dtype=np.float32)
    scope = Scope(tenant_id=tenant_of(bob).pk, embedder=embedder.name)
    before = search_index().dense(scope, query, 10, tokens=[])
    assert len(before) == 10
    IndexEntry.objects.filter(pk=before[0][0]).delete()  # its vector stays
    after = search_index().dense(scope, query, 10, tokens=[])
    assert len(after) == 10 and before[0][0] not in {i for i, _ in after}
    assert [i for i, _ in after[:9]] == [i for i, _ in before[1:]]
