"""One error shape for every 4xx and 5xx, with nothing internal in it: 404s for unknown paths,
405s, 500s from a failing view (in process and through a real ASGI server)."""

from __future__ import annotations

import json
import logging

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.test import APIClient

from tests.api.conftest import Caller, assert_error, assert_no_leak, start_server
from tests.api.urls_boom import SECRET
from tests.conftest import Processes

pytestmark = pytest.mark.django_db

SECRET_PARTS = ("hunter2", "db.internal", "secret.sqlite3", "no_such_table", "secret_column", "RuntimeError")


def assert_clean_500(status: int, content_type: str, content: bytes) -> None:
    assert status == 500, content[:300]
    assert content_type.startswith("application/json")
    assert json.loads(content) == {
        "error": {
            "code": "internal_error",
            "message": "Something went wrong on our side. It has been logged; try again later.",
        }
    }
    assert_no_leak(content)
    for part in SECRET_PARTS:
        assert part.encode() not in content


# --- 500 --------------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)  # a failed SQL statement must not poison the test's transaction
@pytest.mark.urls("tests.api.urls_boom")
@pytest.mark.parametrize("view", ["drf", "plain", "sql"])
def test_a_failing_view_answers_a_clean_500(view: str, caplog: pytest.LogCaptureFixture):
    client = APIClient(raise_request_exception=False)
    with caplog.at_level(logging.ERROR):
        response = client.get(f"/api/boom/{view}")
    assert_clean_500(response.status_code, response["Content-Type"], response.content)
    # The operator still gets the whole story, in the log.
    assert any(record.exc_info for record in caplog.records), caplog.text


@pytest.mark.cluster
@pytest.mark.django_db(transaction=True)
def test_a_real_server_answers_clean_500s_and_json_404s(processes: Processes, subprocess_env: dict[str, str]):
    env = {**subprocess_env, "DJANGO_SETTINGS_MODULE": "tests.api.settings_boom"}
    server = start_server(processes, env)
    with server.client() as http:
        for view in ("drf", "plain", "sql"):
            response = http.get(f"/api/boom/{view}")
            assert_clean_500(response.status_code, response.headers["content-type"], response.content)
        missing = http.get("/api/no/such/route")
        assert missing.status_code == 404
        assert missing.json() == {"error": {"code": "not_found", "message": "Not found."}}
    assert SECRET in processes.logs()  # logged for operators, never sent to the client


# --- 404 for paths --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/api/nope",
        "/api/documents/7e3c1f0a-2b4d-4e6f-8a9b-0c1d2e3f4a5b/jobs/",
        "/api/documents/7e3c1f0a-2b4d-4e6f-8a9b-0c1d2e3f4a5b/jobs/9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d/events/x",
        "/api/search/extra",
    ],
)
def test_an_unknown_api_path_is_a_json_404_in_the_error_shape(alice: Caller, path: str):
    assert_error(alice.client.get(path), 404, "not_found")
    assert_error(APIClient().get(path), 404, "not_found")


def test_an_unknown_page_path_stays_an_html_404():
    response = Client().get("/no-such-page/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


# --- 405 --------------------------------------------------------------------------------------------


def test_wrong_methods_answer_405_in_the_error_shape(alice: Caller):
    body = alice.uploaded()
    doc, status_url = f"/api/documents/{body['document_id']}/", body["status_url"]
    cases = [
        ("delete", "/api/documents/", "GET, POST"),
        ("put", doc, "GET, DELETE"),
        ("post", doc, "GET, DELETE"),
        ("get", f"{doc}versions/", "POST"),
        ("patch", status_url, "GET"),
        ("get", f"{status_url}/cancel", "POST"),
        ("get", f"{status_url}/retry", "POST"),
        ("put", "/api/search?q=x", "GET, POST"),
    ]
    for method, url, allowed in cases:
        response = getattr(alice.client, method)(url)
        assert_error(response, 405, "method_not_allowed")
        for name in allowed.split(", "):
            assert name in response["Allow"], (url, response["Allow"])


def test_a_post_to_the_events_route_is_a_405_in_the_error_shape(alice: Caller):
    body = alice.uploaded()
    client = Client(enforce_csrf_checks=True, headers={"Authorization": f"Token {alice.token}"})
    assert_error(client.post(body["events_url"]), 405, "method_not_allowed")


# --- 400s the framework raises before any view code -------------------------------------------------


@pytest.mark.parametrize("shape", ["too-many-fields", "field-too-large"])
def test_an_oversized_form_is_a_4xx_not_a_500(alice: Caller, shape: str):
    form: dict[str, object] = {"file": SimpleUploadedFile("n.txt", b"notes")}
    if shape == "too-many-fields":
        form.update({f"f{i}": "x" for i in range(1_100)})
    else:
        form["title"] = "x" * (6 * 1024 * 1024)
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Token {alice.token}")
    response = client.post("/api/documents/", form, format="multipart")
    assert 400 <= response.status_code < 500, response.status_code
    assert set(response.json()) == {"error"}


def test_a_401_says_how_to_authenticate():
    response = APIClient().get("/api/documents/")
    assert response.status_code == 401
    assert response.headers.get("WWW-Authenticate") == "Token"


def test_validation_errors_name_the_field(alice: Caller):
    error = assert_error(alice.client.get("/api/search", {"q": "x", "k": "many"}), 400, "invalid")
    assert error["message"] == "The request is not valid."
    assert set(error["detail"]) == {"k"}
    assert all(isinstance(message, str) for message in error["detail"]["k"])
