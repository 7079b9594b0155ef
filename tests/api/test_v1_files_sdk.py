"""/v1/files through the official ``openai`` SDK against a real uvicorn process: upload, list with
keyset pages, retrieve, download, delete, the OpenAI error shape, and another tenant's ids
answered exactly like unknown ones."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from documents.services.accounts import user_create_in_tenant
from tests.api.conftest import Server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.cluster]


def sdk(server: Server, token: str) -> OpenAI:
    return OpenAI(base_url=f"{server.base_url}/v1", api_key=token, max_retries=0, timeout=20)


@pytest.fixture
def tokens() -> tuple[str, str]:
    return (
        user_create_in_tenant(username="alice", tenant_slug="acme"),
        user_create_in_tenant(username="mallory", tenant_slug="evil"),
    )


def error_of(exc: openai.APIStatusError) -> dict[str, Any]:
    body = exc.response.json()
    assert set(body) == {"error"}, body
    error: dict[str, Any] = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert error["message"]
    return error


def test_files_round_trip_through_the_sdk(server: Server, tokens: tuple[str, str]) -> None:
    client = sdk(server, tokens[0])
    created = client.files.create(file=("notes.txt", b"lighthouse keeper notes\n"), purpose="user_data")
    assert created.id.startswith("file-")
    assert (created.filename, created.bytes, created.purpose) == ("notes.txt", 24, "user_data")

    assert client.files.retrieve(created.id).filename == "notes.txt"
    assert client.files.content(created.id).read() == b"lighthouse keeper notes\n"
    assert [f.id for f in client.files.list()] == [created.id]

    deleted = client.files.delete(created.id)
    assert (deleted.id, deleted.deleted) == (created.id, True)
    with pytest.raises(openai.NotFoundError) as gone:
        client.files.retrieve(created.id)
    assert error_of(gone.value)["type"] == "invalid_request_error"
    assert list(client.files.list()) == []


def test_list_pages_follow_keyset_cursors_both_ways(server: Server, tokens: tuple[str, str]) -> None:
    client = sdk(server, tokens[0])
    ids = [client.files.create(file=(f"f{i}.txt", b"x" * (i + 1)), purpose="user_data").id for i in range(5)]

    first = client.files.list(limit=2, order="asc")
    assert [f.id for f in first.data] == ids[:2]
    assert first.has_more
    # The SDK follows 'after' from page to page until has_more is false.
    assert [f.id for f in client.files.list(limit=2, order="asc")] == ids
    assert [f.id for f in client.files.list(limit=2)] == ids[::-1]  # desc is the default
    before = client.files.list(limit=2, order="asc", extra_query={"before": ids[3]})
    assert [f.id for f in before.data] == ids[1:3]
    assert client.files.list(limit=2, order="asc", after=ids[3]).has_more is False


def test_errors_have_the_openai_shape(server: Server, tokens: tuple[str, str]) -> None:
    client = sdk(server, tokens[0])
    with pytest.raises(openai.BadRequestError) as bad_purpose:
        client.files.create(file=("a.txt", b"a"), purpose="nonsense")  # type: ignore[arg-type]
    error = error_of(bad_purpose.value)
    assert (error["code"], error["param"], error["type"]) == (
        "invalid_purpose",
        "purpose",
        "invalid_request_error",
    )

    private = client.files.create(file=("a.txt", b"a"), purpose="assistants")
    with pytest.raises(openai.BadRequestError) as refused:
        client.files.content(private.id)
    assert error_of(refused.value)["code"] == "not_downloadable"

    with pytest.raises(openai.AuthenticationError) as unauthenticated:
        sdk(server, "not-a-token").files.list()
    assert error_of(unauthenticated.value)["type"] == "authentication_error"

    with pytest.raises(openai.BadRequestError) as bad_limit:
        client.files.list(limit=1000)
    assert error_of(bad_limit.value)["param"] == "limit"

    unknown_path = httpx.get(
        f"{server.base_url}/v1/nowhere", headers={"Authorization": f"Bearer {tokens[0]}"}, timeout=20
    )
    assert unknown_path.status_code == 404
    assert set(unknown_path.json()["error"]) == {"message", "type", "param", "code"}


def test_another_tenants_file_ids_are_404_like_unknown_ids(server: Server, tokens: tuple[str, str]) -> None:
    alice, mallory = sdk(server, tokens[0]), sdk(server, tokens[1])
    mine = alice.files.create(file=("secret.txt", b"secret"), purpose="user_data")
    unknown = "file-" + "0" * 32
    for ident in (mine.id, unknown):
        for call in (mallory.files.retrieve, mallory.files.content, mallory.files.delete):
            with pytest.raises(openai.NotFoundError) as refused:
                call(ident)
            error = error_of(refused.value)
            assert error["code"] == "not_found"
            assert error["message"] == f"No file found with id '{ident}'."
    assert list(mallory.files.list()) == []
    assert alice.files.content(mine.id).read() == b"secret"  # untouched
