"""Throttles and the login lockout, counted in the shared database cache."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.cache import caches
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from pytest_django.fixtures import Settings as DjangoSettings
from rest_framework.request import Request
from rest_framework.test import APIClient, APIRequestFactory
from rest_framework.views import APIView

from documents.models import Document
from documents.throttles import _Scoped
from tests.api.conftest import Caller, Server, assert_error, serving

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fresh_counters() -> Iterator[None]:
    caches["throttle"].clear()
    yield
    caches["throttle"].clear()


def rates(settings: DjangoSettings, **overrides: str) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], **overrides},
    }


def test_searches_past_the_user_rate_answer_429(alice: Caller, settings: DjangoSettings) -> None:
    rates(settings, search_user="3/min")
    for _ in range(3):
        assert alice.client.get("/api/search", {"q": "harbor"}).status_code == 200
    response = alice.client.get("/api/search", {"q": "harbor"})
    assert_error(response, 429, "throttled")
    assert int(response["Retry-After"]) > 0


def test_uploads_past_the_address_rate_answer_429_for_every_user(
    alice: Caller, mallory: Caller, settings: DjangoSettings
) -> None:
    rates(settings, upload_ip="2/min")
    alice.uploaded(b"Harbor notes one.")
    mallory.uploaded(b"Harbor notes two.")
    assert_error(alice.upload(b"Harbor notes three."), 429, "throttled")
    # Reading is not uploading.
    assert alice.client.get("/api/documents/").status_code == 200


def test_a_forged_forwarded_for_does_not_get_a_fresh_counter(alice: Caller, settings: DjangoSettings) -> None:
    rates(settings, search_ip="2/min")
    for n in range(2):
        alice.client.get("/api/search", {"q": "harbor"}, HTTP_X_FORWARDED_FOR=f"10.0.0.{n}")
    response = alice.client.get("/api/search", {"q": "harbor"}, HTTP_X_FORWARDED_FOR="10.0.0.9")
    assert_error(response, 429, "throttled")


def test_an_address_sending_bad_tokens_is_throttled_before_lookup(
    alice: Caller, settings: DjangoSettings
) -> None:
    settings.AUTH_FAILURE_LIMIT_PER_ADDRESS = 5
    guesser = APIClient()
    for n in range(5):
        guesser.credentials(HTTP_AUTHORIZATION=f"Token wrong{n}")
        assert_error(guesser.get("/api/documents/"), 401, "not_authenticated")
    guesser.credentials(HTTP_AUTHORIZATION="Token wrong-again")
    assert_error(guesser.get("/api/documents/"), 429, "throttled")
    # A good token is not a guess: it costs no counter query and is served.
    assert alice.client.get("/api/documents/").status_code == 200


def test_forty_wrong_passwords_lock_the_login_even_for_the_right_one(settings: DjangoSettings) -> None:
    settings.LOGIN_FAILURE_LIMIT = 10
    get_user_model().objects.create_user(username="victim", password="correct horse battery")
    browser = Client()
    for n in range(40):
        response = browser.post("/accounts/login/", {"username": "victim", "password": f"guess{n}"})
        assert response.status_code == 200  # the form again, with its error
    response = browser.post("/accounts/login/", {"username": "victim", "password": "correct horse battery"})
    assert response.status_code == 200, "the right password logged in after 40 failures"
    assert "_auth_user_id" not in browser.session
    # Another user is not locked out by the victim's attacker.
    get_user_model().objects.create_user(username="bystander", password="another good phrase")
    assert Client().login(username="bystander", password="another good phrase")


def test_passwords_are_validated() -> None:
    for weak in ("demo", "12345678", "password"):
        with pytest.raises(ValidationError):
            validate_password(weak)
    validate_password("harbor lantern orchard 42")


@pytest.fixture(scope="module")
def strict_server(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(tmp_path_factory, THROTTLE_SEARCH_USER="3/min") as server:
        yield server


@pytest.mark.cluster
def test_the_counter_is_shared_by_every_web_process(
    alice: Caller, strict_server: Server, settings: DjangoSettings
) -> None:
    """Three searches in this process use up the rate; the real server process refuses the next."""
    rates(settings, search_user="3/min")
    for _ in range(3):
        assert alice.client.get("/api/search", {"q": "harbor"}).status_code == 200
    with strict_server.client(alice.token) as http:
        response = http.get("/api/search", params={"q": "harbor"})
    assert response.status_code == 429, response.text
    assert response.json()["error"]["code"] == "throttled"


# --- every write is throttled; a batch costs what its files would ----------------------------------


def _write_views() -> Iterator[tuple[str, str, type[APIView]]]:
    """(route, method, view class) for every write method of every DRF view under /api and /v1."""

    def walk(patterns: list[Any], prefix: str) -> Iterator[tuple[str, Any]]:
        for entry in patterns:
            if isinstance(entry, URLResolver):
                yield from walk(entry.url_patterns, prefix + str(entry.pattern))
            elif isinstance(entry, URLPattern):
                yield prefix + str(entry.pattern), entry.callback

    for route, callback in walk(get_resolver().url_patterns, "/"):
        view = getattr(callback, "cls", None)
        if not (route.startswith(("/api/", "/v1/")) and isinstance(view, type) and issubclass(view, APIView)):
            continue
        for method in ("post", "put", "patch", "delete"):
            if method in view.http_method_names and hasattr(view, method):
                yield route, method.upper(), view


def test_every_write_endpoint_counts_in_a_shared_throttle() -> None:
    writes = list(_write_views())
    names = {f"{view.__module__}.{view.__name__}" for _, _, view in writes}
    assert {"documents.api.batches.BatchesView", "documents.api.reindex.ReindexView"} <= names
    assert "documents.api_v1.vector_stores.StoresView" in names
    unthrottled = []
    for route, method, view_class in writes:
        view = view_class()
        view.request = Request(APIRequestFactory().generic(method, route))
        view.headers, view.args, view.kwargs = {}, (), {}
        throttles = view.get_throttles()
        counting = [t for t in throttles if isinstance(t, _Scoped) and method in t.methods]
        if not counting or not all(isinstance(t.cache, type(caches["throttle"])) for t in counting):
            unthrottled.append(f"{method} {route}")
    assert unthrottled == []


def test_batches_past_the_upload_rate_answer_429(alice: Caller, settings: DjangoSettings) -> None:
    rates(settings, upload_user="4/min")

    def batch(count: int) -> Any:
        files = [SimpleUploadedFile(f"n{n}.txt", b"Harbor notes.") for n in range(count)]
        return alice.client.post("/api/batches", {"files": files}, format="multipart")

    assert batch(3).status_code == 201
    # three of four uploads are spent: a batch of two does not fit, and starts nothing
    assert_error(batch(2), 429, "throttled")
    assert Document.objects.count() == 3
    assert_error(batch(1), 429, "throttled")
    assert_error(alice.upload(b"Harbor notes."), 429, "throttled")


def test_a_batch_larger_than_the_upload_rate_is_refused_as_too_many_files(
    alice: Caller, settings: DjangoSettings
) -> None:
    # Five uploads a minute: a batch of six would never fit, so waiting (429) would not help.
    rates(settings, upload_user="5/min")
    files = [SimpleUploadedFile(f"n{n}.txt", b"Harbor notes.") for n in range(6)]
    response = alice.client.post("/api/batches", {"files": files}, format="multipart")
    assert_error(response, 400, "too_many_files")
    assert "5" in response.json()["error"]["message"]
    assert Document.objects.count() == 0
    caches["throttle"].clear()  # the refused request counted once; a full minute's rate again
    files = [SimpleUploadedFile(f"n{n}.txt", b"Harbor notes.") for n in range(5)]
    assert alice.client.post("/api/batches", {"files": files}, format="multipart").status_code == 201


def test_the_shipped_upload_rates_take_a_batch_of_the_most_files_and_then_more(
    alice: Caller, settings: DjangoSettings
) -> None:
    """The upload rates as shipped (config/settings.py) hold a batch of the most files a batch
    takes, and a second one within the minute: small files come faster than a per-minute count
    of 60 lets them, and the queue quota is what holds uploads back to the workers' pace."""
    from config import settings as shipped
    from documents.api.batches import MAX_FILES

    shipped_rates = shipped.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    rates(settings, upload_user=shipped_rates["upload_user"], upload_ip=shipped_rates["upload_ip"])
    for round_ in range(2):
        files = [SimpleUploadedFile(f"r{round_}-{n}.txt", b"Harbor notes %d." % n) for n in range(MAX_FILES)]
        response = alice.client.post("/api/batches", {"files": files}, format="multipart")
        assert response.status_code == 201, response.content[:300]


def test_vector_store_file_ids_count_as_uploads(alice: Caller, settings: DjangoSettings) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {alice.token}")
    file_ids = []
    for n in range(3):
        response = client.post(
            "/v1/files", {"file": SimpleUploadedFile(f"n{n}.txt", b"Harbor notes."), "purpose": "assistants"}
        )
        assert response.status_code == 200, response.content
        file_ids.append(response.json()["id"])
    caches["throttle"].clear()
    rates(settings, upload_user="2/min")
    response = client.post("/v1/vector_stores", {"name": "s", "file_ids": file_ids}, format="json")
    assert response.status_code == 429, response.content
    assert response.json()["error"]["code"] == "throttled"
    response = client.post("/v1/vector_stores", {"name": "s", "file_ids": file_ids[:2]}, format="json")
    assert response.status_code == 200, response.content


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/collections", {"name": "Harbor"}),
        ("/api/webhooks", {"url": "https://example.org/hook", "events": ["document.ready"]}),
        ("/api/reindex", {}),
        ("/v1/vector_stores", {"name": "Harbor"}),
    ],
)
def test_writes_past_the_write_rate_answer_429(
    alice: Caller, settings: DjangoSettings, path: str, body: dict[str, Any]
) -> None:
    rates(settings, write_user="2/min")
    client = alice.client
    if path.startswith("/v1/"):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {alice.token}")
    for _ in range(2):
        assert client.post(path, body, format="json").status_code != 429
    response = client.post(path, body, format="json")
    assert response.status_code == 429, response.content
    assert int(response["Retry-After"]) > 0
    # reading is not writing
    assert alice.client.get("/api/collections").status_code == 200
