"""Webhooks against hostile endpoints and hosts: an answer trickled a byte at a time ends at the
attempt's deadline (a real local server trickles), IPv6 forms that carry a private IPv4 address
are refused, a host whose name never resolves costs registration a bounded wait, and registration
is throttled."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from documents.models import WebhookAttempt, WebhookEndpoint, WebhookMessage
from documents.webhooks.delivery import TargetRefused, check_target, deliver
from tests.api.test_throttles import rates
from tests.documents.helpers import run_until_idle
from tests.documents.test_delete import client_for
from tests.documents.test_webhooks import register, upload
from tests.documents.webhook_receiver import trickler

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def engine_settings(settings, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.WEBHOOK_ALLOW_PRIVATE = True  # the local endpoints listen on 127.0.0.1


@pytest.fixture
def alice() -> APIClient:
    return client_for("alice", "acme")


def test_an_endpoint_trickling_its_answer_is_cut_off_at_the_attempts_deadline(alice, settings):
    settings.WEBHOOK_TIMEOUT = 2
    with trickler(every=1.0) as slow:
        register(alice, slow.url, ["document.ready"])
        run_until_idle(upload(alice, "Ochre barge on the canal.")["job_id"])
        message = WebhookMessage.objects.get()
        outcome: list[str] = []

        def attempt() -> None:
            outcome.append(deliver(str(message.pk)))
            connection.close()

        sender = threading.Thread(target=attempt, daemon=True)
        started = time.monotonic()
        sender.start()
        sender.join(30)  # liveness bound only; the deadline is 2 s
        still_sending = sender.is_alive()
    sender.join(10)
    assert not still_sending, "a byte a second kept the attempt going past its deadline"
    assert outcome == ["retry later"] and slow.connections == 1
    attempt_row = WebhookAttempt.objects.get()
    assert (attempt_row.status_code, attempt_row.error) == (None, "timed out after 2 s")
    assert time.monotonic() - started < 30
    assert WebhookMessage.objects.get().state == "pending"  # tried again later, on the schedule


PRIVATE_INSIDE_IPV6 = [
    "http://[64:ff9b::a00:1]/",  # NAT64 (well-known prefix) of 10.0.0.1
    "http://[64:ff9b::7f00:1]/",  # NAT64 of 127.0.0.1
    "http://[64:ff9b::a9fe:a9fe]/",  # NAT64 of 169.254.169.254
    "http://[64:ff9b:1::808:808]/",  # local-use NAT64: refused whatever it carries
    "http://[2002:a00:1::1]/",  # 6to4 of 10.0.0.1
    "http://[2002:c0a8:1::1]/",  # 6to4 of 192.168.0.1
    "http://[::10.0.0.1]/",  # IPv4-compatible
    "http://[::127.0.0.1]/",
    "http://[::ffff:10.0.0.1]/",  # IPv4-mapped
    "http://[::ffff:169.254.169.254]/",
    "http://[2001:0:4136:e378:8000:63bf:f5ff:fffe]/",  # Teredo: refused whatever it carries
]
PUBLIC_INSIDE_IPV6 = [
    "http://[64:ff9b::808:808]/",  # NAT64 of 8.8.8.8
    "http://[2002:808:808::1]/",  # 6to4 of 8.8.8.8
    "http://[::ffff:8.8.8.8]/",
    "http://[2606:4700:4700::1111]/",  # plain public IPv6
]


def test_ipv6_forms_carrying_a_private_ipv4_address_are_refused(alice, settings):
    settings.WEBHOOK_ALLOW_PRIVATE = False
    for url in PRIVATE_INSIDE_IPV6:
        response = alice.post("/api/webhooks", {"url": url, "events": ["document.ready"]}, format="json")
        assert response.status_code == 400, url
        assert response.json()["error"]["code"] == "webhook_target_refused", url
        with pytest.raises(TargetRefused):  # and at send time, by the same check
            check_target(url)
    assert not WebhookEndpoint.objects.exists()
    for url in PUBLIC_INSIDE_IPV6:
        assert check_target(url), url


def test_a_host_that_never_resolves_costs_registration_a_bounded_wait(alice, settings, monkeypatch):
    """The resolver stands in for a DNS server that never answers (the call blocks)."""
    settings.WEBHOOK_ALLOW_PRIVATE = False
    settings.WEBHOOK_RESOLVE_TIMEOUT = 1
    answer = threading.Event()
    real = socket.getaddrinfo

    def silent_dns(host: str, *args: Any, **kwargs: Any) -> Any:
        if host.endswith(".silent.example"):
            answer.wait(20)
            raise socket.gaierror(socket.EAI_AGAIN, "no answer")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", silent_dns)
    try:
        started = time.monotonic()
        body = {"url": "https://hooks.silent.example/in", "events": ["document.ready"]}
        response = alice.post("/api/webhooks", body, format="json")
        waited = time.monotonic() - started
    finally:
        answer.set()
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["message"]) == (
        "webhook_target_refused",
        "The URL's host did not resolve in time.",
    )
    assert waited < 15, waited  # liveness bound: the lookup itself blocks 20 s
    assert not WebhookEndpoint.objects.exists()


def test_registering_endpoints_is_throttled_per_user(alice, settings):
    rates(settings, webhook_user="3/min")
    for n in range(3):
        response = alice.post(
            "/api/webhooks", {"url": f"http://127.0.0.1:9/{n}", "events": ["document.ready"]}, format="json"
        )
        assert response.status_code == 201, response.content
    response = alice.post(
        "/api/webhooks", {"url": "http://127.0.0.1:9/x", "events": ["document.ready"]}, format="json"
    )
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "throttled"
    assert WebhookEndpoint.objects.count() == 3
    assert alice.get("/api/webhooks").status_code == 200  # reading is not counted
    # Another user has their own count.
    assert (
        client_for("bob", "globex")
        .post("/api/webhooks", {"url": "http://127.0.0.1:9/b", "events": ["document.ready"]}, format="json")
        .status_code
        == 201
    )
