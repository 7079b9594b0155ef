"""Hybrid search's weights per collection: set and changed through /api/collections (a bad pair
refused, nothing changed), applied by /api/search to the collection searched, and overridden per
request by /v1's ``ranking_options.hybrid_search``; ``score_threshold`` compares with the same
normalised score. Runs on both databases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from documents.embedders import configured_embedder
from documents.models import Collection
from documents.retrieval.fusion import Weights, fuse
from tests.api.conftest import Caller, assert_error, drive

pytestmark = pytest.mark.django_db(transaction=True)  # runs jobs: workers commit

TEXTS = {
    "harbour.txt": "The harbour master logs every tide and every vessel in the harbour.",
    "tides.txt": "Tide tables: high tide and low tide times for the coast, tide by tide.",
    "lighthouse.txt": "A lighthouse keeper watches the coast at night and lights the lamp.",
    "bakery.txt": "Rye dough rests overnight before the baker shapes the loaves.",
}


@pytest.fixture(autouse=True)
def media(settings: Any, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"


def create(caller: Caller, body: dict[str, Any]) -> Any:
    return caller.client.post("/api/collections", json.dumps(body), content_type="application/json")


def patch(caller: Caller, collection: str, body: dict[str, Any]) -> Any:
    return caller.client.patch(
        f"/api/collections/{collection}", json.dumps(body), content_type="application/json"
    )


def fill(caller: Caller, collection: str) -> None:
    for name, text in TEXTS.items():
        form = {"file": SimpleUploadedFile(name, text.encode()), "collection": collection}
        response = caller.client.post("/api/documents/", form, format="multipart")
        assert response.status_code == 201, response.content
        drive(response.json()["job_id"])


def expected_scores(results: list[dict[str, Any]], text: float, embedding: float) -> list[float]:
    """The scores the fusion gives the hits' lists (rebuilt from their components, every
    candidate being a hit here) with these weights and the embedder's noise floor."""
    lists: dict[str, list[tuple[int, float]]] = {}
    for key, result in enumerate(results):
        for name, component in result["components"].items():
            lists.setdefault(name, []).append((key, component["score"]))
    ranked = {name: sorted(found, key=lambda item: -item[1]) for name, found in lists.items()}
    floor = configured_embedder().similarity_floor
    fused = fuse(ranked, len(results), weights=Weights(text, embedding), floors={"semantic": floor})
    by_key = {f.key: f.score for f in fused}
    return [by_key[key] for key in range(len(results))]


def test_weights_are_set_changed_and_checked_through_the_collections_api(alice: Caller):
    made = create(alice, {"name": "Coast", "text_weight": 0.8, "embedding_weight": 0.2})
    assert made.status_code == 201, made.content
    assert (made.json()["text_weight"], made.json()["embedding_weight"]) == (0.8, 0.2)
    collection = made.json()["id"]
    changed = patch(alice, collection, {"embedding_weight": 0.5})
    assert changed.status_code == 200, changed.content
    assert (changed.json()["text_weight"], changed.json()["embedding_weight"]) == (0.8, 0.5)
    assert_error(patch(alice, collection, {"text_weight": 0, "embedding_weight": 0}), 400, "invalid_weight")
    assert_error(patch(alice, collection, {"text_weight": 1.5}), 400, "invalid_weight")
    stored = Collection.objects.get(pk=collection)
    assert (stored.text_weight, stored.embedding_weight) == (0.8, 0.5)  # left as it was
    assert create(alice, {"name": "Default weights"}).json()["embedding_weight"] == 1.0


def test_search_of_one_collection_fuses_with_its_weights(alice: Caller):
    collection = create(alice, {"name": "Coast", "text_weight": 1.0, "embedding_weight": 0.25}).json()["id"]
    fill(alice, collection)
    response = alice.client.get("/api/search", {"q": "tide coast", "collections": collection})
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert {"lexical", "semantic"} <= {name for r in results for name in r["components"]}
    assert len(results) < 10  # every candidate of each list is a hit: its lists are whole here
    # The suite's lexical embedder reads every script and has no "confident" cosine: full trust.
    scores = [r["score"] for r in results]
    assert scores == pytest.approx(expected_scores(results, 1.0, 0.25), abs=1e-3)
    assert scores != pytest.approx(expected_scores(results, 1.0, 1.0), abs=1e-3)  # the weights told


def v1(caller: Caller) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {caller.token}")
    return client


def test_v1_hybrid_search_weights_override_the_store_and_the_threshold_is_the_fused_score(alice: Caller):
    collection = create(alice, {"name": "Coast", "text_weight": 1.0, "embedding_weight": 1.0}).json()["id"]
    fill(alice, collection)
    client = v1(alice)
    store = f"vs_{collection.replace('-', '')}"

    def search(ranking: dict[str, Any]) -> Any:
        body = {"query": "tide coast", "ranking_options": ranking}
        return client.post(f"/v1/vector_stores/{store}/search", body, format="json")

    text_only = search({"hybrid_search": {"embedding_weight": 0, "text_weight": 1}})
    assert text_only.status_code == 200, text_only.content
    params = {"q": "tide coast", "mode": "lexical", "collections": collection}
    lexical = alice.client.get("/api/search", params)
    lexical_titles = [r["document_title"] for r in lexical.json()["results"]]
    data = text_only.json()["data"]
    # Text alone decides the order; the dense list's own finds follow at score 0.
    assert [d["filename"] for d in data if d["score"] > 0] == lexical_titles
    assert data[0]["score"] == pytest.approx(1.0)
    assert all(d["score"] == 0 for d in data[len(lexical_titles) :])

    strict = search({"hybrid_search": {"embedding_weight": 0, "text_weight": 1}, "score_threshold": 0.99})
    assert [d["filename"] for d in strict.json()["data"]] == lexical_titles[:1]

    for bad in ({"embedding_weight": 0, "text_weight": 0}, {"embedding_weight": 2}, {"weight": 1}, [1]):
        assert search({"hybrid_search": bad}).status_code == 400
