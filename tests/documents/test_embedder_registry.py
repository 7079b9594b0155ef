"""The embedder registry: a backend defined outside ``documents/embedders/`` plugs in with one
``register`` call (specs, stored names, the setting, a re-index onto it), a second registration of
a name or of its names' prefix is refused, and the built-in backends keep their names."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured

from documents import embedders
from documents.embedders import (
    UnknownEmbedder,
    configured_embedder,
    embedder_for,
    get_embedder,
    register,
    registry,
)
from documents.embedders.base import Embedder, Vectors, normalise_rows
from documents.embedders.hashing import HashingEmbedder
from documents.embedders.local import LocalModelEmbedder
from documents.models import ChunkVector, Tenant
from documents.search import search
from documents.services.reindex import reindex_start
from jobs.models import Status
from tests.documents.helpers import make_tenant, run_until_idle, upload


class ToyEmbedder:
    """Letter counts folded into ``dimension`` columns: a backend this test module owns."""

    similarity_floor = 0.0
    window = 64

    def __init__(self, dimension: int = 8) -> None:
        self._dimension = dimension

    @property
    def name(self) -> str:
        return f"toy-v1-{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def embed(self, texts: Sequence[str]) -> Vectors:
        matrix = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for char in text.casefold():
                if char.isalnum():
                    matrix[row, ord(char) % self._dimension] += 1
        return normalise_rows(matrix)


def toy_named(spec: str) -> ToyEmbedder | None:
    backend, _, dimension = spec.partition(":")
    if backend == "toy":
        return ToyEmbedder(int(dimension)) if dimension.isdigit() else ToyEmbedder()
    stored = re.fullmatch(r"toy-v1-(\d+)", spec)
    return ToyEmbedder(int(stored.group(1))) if stored else None


@pytest.fixture
def own_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The registry as the app built it, restored (with the caches of built embedders) after."""
    monkeypatch.setattr(registry, "_backends", dict(registry._backends))
    embedders._named.cache_clear()
    configured_embedder.cache_clear()
    yield
    embedders._named.cache_clear()
    configured_embedder.cache_clear()


@pytest.fixture
def toy(own_registry: None) -> None:
    register("toy", ToyEmbedder, named=toy_named)


def test_a_spec_of_an_unregistered_backend_is_unknown(own_registry: None) -> None:
    with pytest.raises(UnknownEmbedder):
        embedder_for("toy:8")


def test_a_backend_registered_from_outside_answers_its_specs_and_stored_names(toy: None) -> None:
    by_spec = embedder_for("toy:8")

    assert isinstance(by_spec, ToyEmbedder) and isinstance(by_spec, Embedder)
    assert (by_spec.name, by_spec.dimension) == ("toy-v1-8", 8)
    assert embedder_for("toy-v1-32").dimension == 32  # a name stored on vectors maps back
    assert embedder_for("toy").dimension == 8
    assert isinstance(get_embedder("toy", dimension=16), ToyEmbedder)
    with pytest.raises(UnknownEmbedder):
        embedder_for("toy-v2-8")  # its own resolver says no


def test_the_setting_can_choose_a_registered_backend(toy: None, settings) -> None:
    settings.EMBEDDINGS_BACKEND = "toy"
    configured_embedder.cache_clear()

    assert configured_embedder().name == "toy-v1-8"
    assert embedder_for("toy") is configured_embedder()


def test_a_second_registration_of_a_name_or_of_its_names_is_refused(toy: None) -> None:
    with pytest.raises(ValueError, match="'toy' is already registered"):
        register("toy", ToyEmbedder, named=toy_named)
    with pytest.raises(ValueError, match="already registered"):
        register("hashing", ToyEmbedder)
    with pytest.raises(ValueError, match="clash with the 'hashing' backend"):
        register("hashing2", ToyEmbedder, prefix="hashing-")
    with pytest.raises(ValueError, match="clash with the 'toy' backend"):
        register("toy-large", ToyEmbedder)  # its names ("toy-large-...") would start "toy-"

    assert isinstance(embedder_for("hashing:64"), HashingEmbedder)  # the refusals changed nothing
    assert isinstance(embedder_for("toy:8"), ToyEmbedder)


def test_unknown_backends_and_names_keep_their_errors(own_registry: None, settings) -> None:
    settings.EMBEDDINGS_BACKEND = "hashing"
    for spec in ("word2vec", "hashing-v2-512", "local-some-other-model", "http", "st-model", "gpt-9"):
        with pytest.raises(UnknownEmbedder, match="No embedder named"):
            embedder_for(spec)
    with pytest.raises(ImproperlyConfigured, match="unknown EMBEDDINGS_BACKEND 'word2vec'"):
        get_embedder("word2vec")


def test_the_built_in_backends_keep_the_names_stored_on_vectors(settings) -> None:
    settings.EMBEDDINGS_BACKEND = "hashing"
    configured_embedder.cache_clear()
    try:
        assert embedder_for("hashing-v1-512").name == "hashing-v1-512"
        assert embedder_for("hashing:256").name == "hashing-v1-256"
        assert embedder_for("local-all-minilm-l6-v2-v1-384").name == "local-all-minilm-l6-v2-v1-384"
        assert isinstance(embedder_for("local"), LocalModelEmbedder)
    finally:
        configured_embedder.cache_clear()


@pytest.mark.django_db(transaction=True)
def test_a_workspace_reindexes_onto_a_registered_backend_and_searches_with_it(
    toy: None, settings, tmp_path
) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    tenant = make_tenant("acme")
    result = upload(tenant, b"The harbour master logged every fishing boat.", "harbour.txt")
    assert result.job is not None and run_until_idle(result.job.pk).status == Status.READY

    job = reindex_start(tenant=tenant, embedder="toy:16")
    assert run_until_idle(job.pk).status == Status.READY

    tenant = Tenant.objects.get(pk=tenant.pk)
    assert tenant.active_embedder == "toy-v1-16"
    stored = set(ChunkVector.objects.filter(version=result.version).values_list("embedder", flat=True))
    assert "toy-v1-16" in stored  # beside the retired hashing vectors until their sweep
    hits = search(tenant, "fishing boat", k=5, mode="semantic")
    assert [hit.document_id for hit in hits] == [result.version.document_id]
