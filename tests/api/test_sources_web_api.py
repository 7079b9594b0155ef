"""``/api/sources`` with ``kind: web``: the settings as stored (defaults and the operator's caps),
each refusal a 400 with its code and field, a start URL in a network not allowed refused at
create, and credentials write-only (kept on a change, never in an answer or an error)."""

from __future__ import annotations

from typing import Any

import pytest

from documents.sources.credentials import credentials_of
from documents.sources.models import Source
from tests.api.conftest import Caller, assert_error
from tests.api.test_sources_api import collection_id, make_admin

pytestmark = pytest.mark.django_db

SECRET = "bearer-5e7c1d-write-only"
SITE = "http://127.0.0.1:8765/"


@pytest.fixture
def web(settings: Any) -> None:
    settings.SOURCES_WEB_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    settings.SOURCES_WEB_MAX_PAGES = 500
    settings.SOURCES_WEB_MAX_DEPTH = 6


def create(caller: Caller, config: Any, **extra: Any) -> Any:
    body = {"name": "Site", "collection": collection_id(caller), "kind": "web", "config": config, **extra}
    return caller.client.post("/api/sources", body, format="json")


def test_an_admin_makes_a_web_source_and_its_credentials_are_never_shown(alice, web):
    make_admin(alice)
    response = create(
        alice,
        {"start_urls": ["HTTP://127.0.0.1:8765/docs/#top", SITE + "docs/"], "include_prefix": "/docs/"},
        credentials={"bearer_token": SECRET},
    )
    assert response.status_code == 201, response.content
    made = response.json()
    assert made["kind"] == "web" and made["has_credentials"] is True
    assert made["config"] == {
        "start_urls": [SITE + "docs/"],  # one canonical spelling, fragment dropped
        "max_depth": 3,
        "page_limit": 100,
        "include_prefix": "/docs/",
    }
    shown = [
        response,
        alice.client.get(f"/api/sources/{made['id']}"),
        alice.client.get("/api/sources"),
        alice.client.patch(
            f"/api/sources/{made['id']}",
            {"credentials": {"header_name": "X-Team", "header_value": "blue"}},
            format="json",
        ),
    ]
    assert all(SECRET not in r.content.decode() for r in shown)
    # A secret left out of a change keeps its stored value.
    stored = credentials_of(Source.objects.get(pk=made["id"]))
    assert stored == {"bearer_token": SECRET, "header_name": "X-Team", "header_value": "blue"}


@pytest.mark.parametrize(
    ("config", "code", "field"),
    [
        ({"start_urls": ["ftp://127.0.0.1/"]}, "invalid_url", "start_urls"),
        ({"start_urls": "http://127.0.0.1/"}, "invalid_url", "start_urls"),
        ({"start_urls": [SITE, "http://127.0.0.1:9999/"]}, "invalid_url", "start_urls"),
        ({"start_urls": [SITE], "sitemap": SITE + "sitemap.xml"}, "invalid_config", "start_urls"),
        ({}, "invalid_config", "start_urls"),
        ({"sitemap": "not a url"}, "invalid_url", "sitemap"),
        ({"start_urls": [SITE], "page_limit": 501}, "invalid_page_limit", "page_limit"),
        ({"start_urls": [SITE], "page_limit": 0}, "invalid_page_limit", "page_limit"),
        ({"start_urls": [SITE], "max_depth": 7}, "invalid_depth", "max_depth"),
        ({"start_urls": [SITE], "max_depth": True}, "invalid_depth", "max_depth"),
        ({"start_urls": [SITE], "include_prefix": "docs"}, "invalid_prefix", "include_prefix"),
        ({"start_urls": [SITE], "path": "/srv"}, "invalid_config", "path"),
        ({"start_urls": ["http://127.0.0.2:8765/"]}, "address_not_allowed", "start_urls"),
        ({"sitemap": "http://[::1]:8765/sitemap.xml"}, "address_not_allowed", "sitemap"),
    ],
)
def test_bad_settings_are_400s_naming_their_field(alice, web, config, code, field):
    make_admin(alice)
    error = assert_error(create(alice, config), 400, code)
    assert error["detail"] == {"field": field}
    assert not Source.objects.exists()


def test_a_private_start_url_is_refused_when_no_network_is_allowed(alice, settings):
    settings.SOURCES_WEB_ALLOWED_NETWORKS = []
    make_admin(alice)
    error = assert_error(create(alice, {"start_urls": [SITE]}), 400, "address_not_allowed")
    assert error["detail"] == {"field": "start_urls"}
    # Webhooks' switch is not this one.
    settings.WEBHOOK_ALLOW_PRIVATE = True
    assert_error(create(alice, {"start_urls": [SITE]}), 400, "address_not_allowed")


@pytest.mark.parametrize(
    "credentials",
    [
        {"password": SECRET},
        {"header_name": "X-Key"},
        {"header_value": SECRET},
        {"header_name": "Host", "header_value": SECRET},
        {"header_name": "Bad Name", "header_value": SECRET},
        {"bearer_token": SECRET + "\r\nX-Injected: 1"},
    ],
)
def test_bad_credentials_are_400s_that_never_repeat_them(alice, web, credentials):
    make_admin(alice)
    response = create(alice, {"start_urls": [SITE]}, credentials=credentials)
    error = assert_error(response, 400, "invalid_credentials")
    assert error["detail"] == {"field": "credentials"}
    assert SECRET not in response.content.decode()
    assert not Source.objects.exists()
