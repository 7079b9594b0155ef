"""What the server's log says about answers: a client's 4xx is not a warning for the operator."""

from __future__ import annotations

import logging

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def request_records(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "django.request"]


def test_a_not_found_and_a_refused_token_print_no_warning(caplog: pytest.LogCaptureFixture):
    client = Client()
    with caplog.at_level(logging.DEBUG):
        assert client.get("/no-such-page/").status_code == 404
        assert client.get("/api/documents/", HTTP_AUTHORIZATION="Token wrong").status_code == 401
    assert request_records(caplog) == []


def test_client_errors_are_logged_at_info_where_asked_for(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO, logger="django.request")  # what REQUEST_LOG_LEVEL=INFO sets
    assert Client().get("/no-such-page/").status_code == 404
    assert request_records(caplog) == [(logging.INFO, "Not Found: /no-such-page/")]
