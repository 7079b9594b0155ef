"""The per-process memory of good API tokens (documents/api/token_cache.py): a polling client's
repeated requests skip the token query, and revocation takes effect within the stated bound: at
once in the process that made the change, within API_TOKEN_CACHE_SECONDS for the others."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from documents.api import token_cache
from documents.models import Membership, Tenant
from tests.api.conftest import Caller, assert_error, token_client

pytestmark = pytest.mark.django_db

TTL = 5


@pytest.fixture(autouse=True)
def memory(settings: Any) -> Iterator[None]:
    settings.API_TOKEN_CACHE_SECONDS = TTL
    token_cache.forget_all()
    yield
    token_cache.forget_all()


class Clock:
    """Time for the memory that a test moves forward instead of waiting."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    moved = Clock()
    monkeypatch.setattr(token_cache, "clock", moved)
    return moved


def test_a_polling_clients_repeated_status_requests_make_one_query(
    alice: Caller, django_assert_num_queries: Any
):
    body = alice.uploaded()
    token_cache.forget_all()
    with django_assert_num_queries(2):  # the token, then the version with its job
        assert alice.client.get(body["status_url"]).status_code == 200
    with django_assert_num_queries(1) as captured:  # the token remembered: the version only
        response = alice.client.get(body["status_url"])
    assert response.status_code == 200 and response.json()["job_id"] == body["job_id"]
    assert "authtoken_token" not in captured.captured_queries[0]["sql"]


def test_a_revoked_token_is_refused_at_once_in_the_same_process(alice: Caller):
    body = alice.uploaded()
    assert alice.client.get(body["status_url"]).status_code == 200
    Token.objects.get(key=alice.token).delete()
    assert_error(alice.client.get(body["status_url"]), 401, "not_authenticated")


def test_a_user_deactivated_by_save_is_refused_at_once(alice: Caller):
    body = alice.uploaded()
    assert alice.client.get(body["status_url"]).status_code == 200
    user = get_user_model().objects.get(username="alice")
    user.is_active = False
    user.save(update_fields=["is_active"])
    assert_error(alice.client.get(body["status_url"]), 401, "not_authenticated")


def test_a_change_this_process_did_not_see_takes_effect_within_the_bound(alice: Caller, clock: Clock):
    # As another web process sees a deactivation (or here: an UPDATE that sends no signal).
    body = alice.uploaded()
    assert alice.client.get(body["status_url"]).status_code == 200
    get_user_model().objects.filter(username="alice").update(is_active=False)
    clock.now += TTL - 0.5
    assert alice.client.get(body["status_url"]).status_code == 200  # still remembered
    clock.now += 0.5
    assert_error(alice.client.get(body["status_url"]), 401, "not_authenticated")


def test_a_moved_membership_is_seen_at_once(alice: Caller, mallory: Caller):
    body = alice.uploaded()
    assert alice.client.get(body["status_url"]).status_code == 200
    membership = Membership.objects.get(user__username="alice")
    membership.tenant = Tenant.objects.get(slug="globex")
    membership.save(update_fields=["tenant"])
    assert_error(alice.client.get(body["status_url"]), 404, "not_found")


def test_unknown_tokens_and_inactive_users_are_never_remembered(alice: Caller):
    assert_error(token_client("0" * 40).get("/api/documents/"), 401, "not_authenticated")
    get_user_model().objects.filter(username="alice").update(is_active=False)
    assert_error(alice.client.get("/api/documents/"), 401, "not_authenticated")
    assert token_cache._entries == {}
    get_user_model().objects.filter(username="alice").update(is_active=True)
    assert alice.client.get("/api/documents/").status_code == 200
    assert list(token_cache._entries) == [alice.token]


def test_off_at_zero_seconds(alice: Caller, settings: Any, django_assert_num_queries: Any):
    settings.API_TOKEN_CACHE_SECONDS = 0
    body = alice.uploaded()
    assert alice.client.get(body["status_url"]).status_code == 200
    with django_assert_num_queries(2):
        assert alice.client.get(body["status_url"]).status_code == 200
    assert token_cache._entries == {}
