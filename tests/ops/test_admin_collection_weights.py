"""An operator tunes a collection's hybrid search weights in the admin (the only fields it may
change there); a pair that would leave search nothing to rank by is refused, unchanged."""

from __future__ import annotations

import pytest
from django.test import Client

from documents.models import Collection
from documents.services.collections import collection_create
from tests.ops.conftest import login, make_staff
from tests.ops.helpers import tenant

pytestmark = pytest.mark.django_db


def staff(*codenames: str) -> Client:
    return login(make_staff("cora", *codenames, app="documents"))


def change(client: Client, collection: Collection, text: str, embedding: str) -> object:
    url = f"/admin/documents/collection/{collection.pk}/change/"
    return client.post(url, {"text_weight": text, "embedding_weight": embedding})


def test_an_operator_sets_the_weights_and_a_pair_of_zeros_is_refused():
    collection = collection_create(tenant=tenant(), name="Manuals")
    client = staff("view_collection", "change_collection")
    page = client.get(f"/admin/documents/collection/{collection.pk}/change/")
    assert page.status_code == 200
    assert b'name="embedding_weight"' in page.content and b'name="name"' not in page.content
    response = change(client, collection, "1", "0.3")
    assert response.status_code == 302, response.content[:2000]
    collection.refresh_from_db()
    assert (collection.text_weight, collection.embedding_weight) == (1.0, 0.3)
    refused = change(client, collection, "0", "0")
    assert refused.status_code == 200 and b"must be above 0" in refused.content
    collection.refresh_from_db()
    assert (collection.text_weight, collection.embedding_weight) == (1.0, 0.3)


def test_without_the_change_permission_the_weights_are_read_only():
    collection = collection_create(tenant=tenant(), name="Manuals")
    client = staff("view_collection")
    assert change(client, collection, "0.5", "0.5").status_code == 403
    collection.refresh_from_db()
    assert (collection.text_weight, collection.embedding_weight) == (1.0, 1.0)
