"""Who may call the API: token and session authentication, ``create_api_user``, 401 and 403."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import override_settings
from rest_framework.test import APIClient

from documents.models import Document
from documents.services.accounts import user_create_in_tenant
from tests.api.conftest import TEXT, Caller, assert_error, token_client

pytestmark = pytest.mark.django_db

DOC = "7e3c1f0a-2b4d-4e6f-8a9b-0c1d2e3f4a5b"
JOB = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
ROUTES = [
    ("get", "/api/documents/"),
    ("post", "/api/documents/"),
    ("get", f"/api/documents/{DOC}/"),
    ("post", f"/api/documents/{DOC}/versions/"),
    ("get", f"/api/documents/{DOC}/jobs/{JOB}"),
    ("post", f"/api/documents/{DOC}/jobs/{JOB}/cancel"),
    ("post", f"/api/documents/{DOC}/jobs/{JOB}/retry"),
    ("get", f"/api/documents/{DOC}/jobs/{JOB}/events"),
    ("get", "/api/search?q=harbor"),
]
ROUTE_IDS = ["list", "upload", "detail", "versions", "status", "cancel", "retry", "events", "search"]


@pytest.mark.parametrize(("method", "url"), ROUTES, ids=ROUTE_IDS)
def test_every_route_answers_401_without_credentials(method: str, url: str):
    response = getattr(APIClient(), method)(url)
    assert_error(response, 401, "not_authenticated")


@pytest.mark.parametrize(("method", "url"), ROUTES, ids=ROUTE_IDS)
def test_every_route_answers_401_for_an_unknown_token(method: str, url: str):
    response = getattr(token_client("0" * 40), method)(url)
    assert_error(response, 401, "not_authenticated")


@pytest.mark.parametrize(("method", "url"), ROUTES, ids=ROUTE_IDS)
def test_every_route_answers_403_for_a_user_without_a_tenant(loner: APIClient, method: str, url: str):
    assert_error(getattr(loner, method)(url), 403, "permission_denied")


def test_a_deactivated_users_token_stops_working(alice: Caller):
    assert alice.client.get("/api/documents/").status_code == 200
    get_user_model().objects.filter(username="alice").update(is_active=False)
    error = assert_error(alice.client.get("/api/documents/"), 401, "not_authenticated")
    assert error["message"] == "The token is not valid: its user was deactivated."


def test_a_wrong_token_is_told_it_is_not_valid_not_asked_for_one():
    error = assert_error(token_client("0" * 40).get("/api/documents/"), 401, "not_authenticated")
    assert error["message"] == "The token is not valid: it is wrong or was revoked."
    # Without any credentials the caller is asked for them.
    missing = assert_error(APIClient().get("/api/documents/"), 401, "not_authenticated")
    assert missing["message"] == "Authentication is required: send a token or log in."


def test_a_revoked_token_is_told_it_is_not_valid(alice: Caller):
    from rest_framework.authtoken.models import Token

    with override_settings(API_TOKEN_CACHE_SECONDS=0):
        Token.objects.filter(key=alice.token).delete()
        error = assert_error(alice.client.get("/api/documents/"), 401, "not_authenticated")
    assert error["message"] == "The token is not valid: it is wrong or was revoked."


@pytest.mark.parametrize("scheme", ["Token", "Bearer", "bearer"])
def test_the_token_is_accepted_with_the_token_or_the_bearer_scheme(alice: Caller, scheme: str):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{scheme} {alice.token}")
    assert client.get("/api/documents/").status_code == 200
    client.credentials(HTTP_AUTHORIZATION=f"{scheme} {'0' * 40}")
    assert_error(client.get("/api/documents/"), 401, "not_authenticated")


def test_v1_keeps_the_bearer_scheme_only(alice: Caller):
    bearer = APIClient()
    bearer.credentials(HTTP_AUTHORIZATION=f"Bearer {alice.token}")
    assert bearer.get("/v1/files").status_code == 200
    tokened = token_client(alice.token)
    assert tokened.get("/v1/files").status_code == 401


def test_session_authentication_works_for_reads_and_writes(alice: Caller):
    client = APIClient()
    client.force_login(get_user_model().objects.get(username="alice"))
    response = client.post("/api/documents/", {"file": SimpleUploadedFile("n.txt", TEXT)}, format="multipart")
    assert response.status_code == 201
    status_url = response.json()["status_url"]
    assert client.get("/api/documents/").json()["count"] == 1
    assert alice.client.get(status_url).status_code == 200  # the same tenant's token sees it too
    assert client.get(status_url).json()["state"] == "queued"
    assert client.post(f"{status_url}/cancel").status_code == 202


def test_login_with_a_password_gives_a_working_session():
    user_create_in_tenant(username="carol", tenant_slug="acme", password="s3cret-pass")
    client = APIClient()
    assert client.login(username="carol", password="s3cret-pass")
    response = client.get("/api/documents/")
    assert response.status_code == 200
    assert response.json()["count"] == 0


def test_session_writes_need_the_csrf_token(alice: Caller):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(get_user_model().objects.get(username="alice"))
    status_url = alice.uploaded()["status_url"]
    error = assert_error(client.post(f"{status_url}/cancel"), 403, "permission_denied")
    assert error["message"]
    # A token client needs no CSRF token: it sends no cookie a browser could be tricked into.
    tokened = APIClient(enforce_csrf_checks=True)
    tokened.credentials(HTTP_AUTHORIZATION=f"Token {alice.token}")
    assert tokened.post(f"{status_url}/cancel").status_code == 202


def test_create_api_user_prints_a_token_that_authenticates_in_its_tenant():
    out = StringIO()
    call_command("create_api_user", "dave", "--tenant", "Initech", stdout=out)
    token = out.getvalue().strip()
    assert len(token) == 40

    client = token_client(token)
    upload = client.post("/api/documents/", {"file": SimpleUploadedFile("n.txt", TEXT)}, format="multipart")
    assert upload.status_code == 201
    assert Document.objects.get(pk=upload.json()["document_id"]).tenant.slug == "initech"

    again = StringIO()
    call_command("create_api_user", "dave", "--tenant", "initech", stdout=again)
    assert again.getvalue().strip() == token


def test_create_api_user_refuses_a_user_of_another_tenant_with_a_clean_error():
    call_command("create_api_user", "frank", "--tenant", "acme", stdout=StringIO())
    with pytest.raises(CommandError, match="already belongs"):
        call_command("create_api_user", "frank", "--tenant", "globex", stdout=StringIO())
