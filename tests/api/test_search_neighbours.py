"""``neighbours=N``: each hit comes with the N chunks before and after it in its document version,
in reading order, through /api/search (GET and POST), /v1 vector store search (an extension
field the official SDK carries through unchanged) and the search page."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from django.core.handlers.wsgi import WSGIHandler
from openai import OpenAI

from documents.models import Chunk, Document
from tests.api.conftest import Caller, drive

pytestmark = pytest.mark.django_db(transaction=True)

# Twelve paragraphs, one chunk each at the sizes below: a hit in the middle has neighbours both ways.
PARAGRAPHS = [
    f"Section {n} of the keeper's log notes the {word} weather and the ships that passed the point."
    for n, word in enumerate(
        [
            "calm",
            "foggy",
            "stormy",
            "bright",
            "windy",
            "hazy",
            "freezing",
            "humid",
            "grey",
            "clear",
            "wet",
            "mild",
        ]
    )
]


@pytest.fixture(autouse=True)
def small_chunks(settings: Any, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.CHUNK_TARGET_TOKENS = 20
    settings.CHUNK_MAX_TOKENS = 30


@pytest.fixture
def log(alice: Caller) -> dict[str, Any]:
    made = alice.uploaded("\n\n".join(PARAGRAPHS).encode(), "log.txt")
    drive(made["job_id"])
    document = Document.objects.get(pk=made["document_id"])
    chunks = list(
        Chunk.objects.filter(version_id=document.published_version_id)
        .order_by("ordinal")
        .values_list("ordinal", "text")
    )
    assert len(chunks) == len(PARAGRAPHS)
    return {"document": document, "texts": dict(chunks)}


def test_a_hit_comes_with_the_chunks_around_it_in_reading_order(alice: Caller, log: dict[str, Any]) -> None:
    texts = log["texts"]
    response = alice.client.get("/api/search", {"q": "stormy", "neighbours": "2", "mode": "lexical"})
    assert response.status_code == 200, response.content
    [hit] = response.json()["results"]
    assert hit["ordinal"] == 2 and "stormy" in texts[2]
    around = hit["neighbours"]
    assert [c["ordinal"] for c in around["before"]] == [0, 1]
    assert [c["ordinal"] for c in around["after"]] == [3, 4]
    assert [c["text"] for c in around["before"] + around["after"]] == [texts[o] for o in (0, 1, 3, 4)]
    assert all(c["page_start"] == 1 and c["heading_path"] == [] for c in around["after"])

    # At the version's start there is nothing before; POST takes the same field.
    response = alice.client.post(
        "/api/search",
        json.dumps({"query": "calm", "neighbours": 1, "mode": "lexical"}),
        content_type="application/json",
    )
    [first] = response.json()["results"]
    assert first["ordinal"] == 0
    assert first["neighbours"] == {
        "before": [],
        "after": [{"ordinal": 1, "text": texts[1], "page_start": 1, "page_end": 1, "heading_path": []}],
    }


def test_without_neighbours_a_hit_has_none_and_the_bound_is_five(alice: Caller, log: dict[str, Any]) -> None:
    plain = alice.client.get("/api/search", {"q": "stormy", "mode": "lexical"}).json()["results"][0]
    assert "neighbours" not in plain
    for bad in ("6", "-1", "many"):
        response = alice.client.get("/api/search", {"q": "stormy", "neighbours": bad})
        assert response.status_code == 400, response.content
        assert "neighbours" in response.content.decode()
    response = alice.client.post(
        "/api/search", json.dumps({"query": "stormy", "neighbours": 9}), content_type="application/json"
    )
    assert response.status_code == 400


def test_the_official_sdk_carries_the_v1_extension_field(alice: Caller) -> None:
    """The openai SDK, unchanged, over HTTP to this Django app in-process (WSGI)."""
    client = OpenAI(
        base_url="http://testserver/v1",
        api_key=alice.token,
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.WSGITransport(app=WSGIHandler())),
    )
    store = client.vector_stores.create(name="Logs")
    made = client.files.create(file=("log.txt", "\n\n".join(PARAGRAPHS).encode()), purpose="assistants")
    attached = client.vector_stores.files.create(vector_store_id=store.id, file_id=made.id)
    drive((attached.model_extra or {})["job_id"])
    texts = dict(Chunk.objects.order_by("ordinal").values_list("ordinal", "text"))
    page = client.vector_stores.search(
        store.id, query="stormy weather", max_num_results=1, extra_body={"neighbours": 1}
    )
    [result] = page.data
    assert result.content[0].text and "stormy" in result.content[0].text
    extra: dict[str, Any] = result.model_extra or {}
    assert extra["neighbours"] == {
        "before": [{"type": "text", "text": texts[1]}],
        "after": [{"type": "text", "text": texts[3]}],
    }
    plain = client.vector_stores.search(store.id, query="stormy weather", max_num_results=1).data[0]
    assert "neighbours" not in (plain.model_extra or {})
    with pytest.raises(openai.BadRequestError):
        client.vector_stores.search(store.id, query="stormy", extra_body={"neighbours": 6})


def test_the_search_page_shows_the_chunks_around_a_result(alice: Caller, log: dict[str, Any]) -> None:
    from django.contrib.auth import get_user_model
    from django.test import Client

    texts = log["texts"]
    page = Client()
    page.force_login(get_user_model().objects.get(username="alice"))
    body = page.get("/search", {"q": "stormy", "mode": "lexical", "neighbours": "1"}).content.decode()
    assert f'<p class="neighbour" data-field="before" data-ordinal="1">{texts[1]}</p>' in body.replace(
        "&#x27;", "'"
    )
    assert f'data-field="after" data-ordinal="3">{texts[3]}</p>' in body.replace("&#x27;", "'")
    assert '<option value="1" selected>' in body
    plain = page.get("/search", {"q": "stormy", "mode": "lexical"}).content.decode()
    assert 'class="neighbour"' not in plain
    assert uuid.UUID(str(log["document"].pk))
