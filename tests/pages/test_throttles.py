"""The pages count in the API's throttle counters: the upload form and the search page are no
way around them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.core.cache import caches
from django.core.files.uploadedfile import SimpleUploadedFile
from pytest_django.fixtures import Settings as DjangoSettings

from tests.pages.helpers import Member, html


@pytest.fixture(autouse=True)
def fresh_counters(transactional_db: None) -> Iterator[None]:
    caches["throttle"].clear()
    yield
    caches["throttle"].clear()


def rates(settings: DjangoSettings, **overrides: str) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], **overrides},
    }


def test_the_upload_form_answers_429_past_the_upload_rate(alice: Member, settings: DjangoSettings) -> None:
    rates(settings, upload_user="2/min")
    for n in range(2):
        response = alice.client.post("/", {"file": SimpleUploadedFile(f"n{n}.txt", b"Harbor notes %d." % n)})
        assert response.status_code == 303
    response = alice.client.post("/", {"file": SimpleUploadedFile("n3.txt", b"Harbor notes three.")})
    assert response.status_code == 429
    assert "Too many uploads" in html(response)


def test_the_search_page_answers_429_past_the_search_rate(alice: Member, settings: DjangoSettings) -> None:
    rates(settings, search_user="2/min")
    for _ in range(2):
        assert alice.client.get("/search", {"q": "harbor"}).status_code == 200
    response = alice.client.get("/search", {"q": "harbor"})
    assert response.status_code == 429
    assert "Too many searches" in html(response)
