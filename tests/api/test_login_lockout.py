"""The login lockout counts wrong passwords per (user name, client address) pair, plus a limit
per address: someone elsewhere cannot lock a user out of the login pages, while guessing from one
address is still stopped, for one user name or many."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import caches
from django.test import Client
from pytest_django.fixtures import Settings as DjangoSettings

pytestmark = pytest.mark.django_db(transaction=True)

ATTACKER = "203.0.113.5"
VICTIM = "198.51.100.7"
RIGHT = "correct horse battery"


@pytest.fixture(autouse=True)
def limits(settings: DjangoSettings) -> Iterator[None]:
    settings.LOGIN_FAILURE_LIMIT = 10
    settings.AUTH_FAILURE_LIMIT_PER_ADDRESS = 30
    caches["throttle"].clear()
    get_user_model().objects.create_user(username="victim", password=RIGHT)
    yield
    caches["throttle"].clear()


def log_in(client: Client, page: str, username: str, password: str) -> bool:
    response = client.post(page, {"username": username, "password": password})
    assert response.status_code in (200, 302)
    return "_auth_user_id" in client.session


@pytest.mark.parametrize("page", ["/accounts/login/", "/admin/login/"])
def test_wrong_passwords_from_elsewhere_do_not_lock_the_user_out(page: str) -> None:
    attacker = Client(REMOTE_ADDR=ATTACKER)
    for n in range(25):
        assert not log_in(attacker, page, "victim", f"guess{n}")
    # The attacker's address is locked for this user name, the right password included ...
    assert not log_in(attacker, page, "victim", RIGHT)
    # ... the real user, at their own address, is not.
    assert log_in(Client(REMOTE_ADDR=VICTIM), "/accounts/login/", "victim", RIGHT)


def test_guessing_many_user_names_from_one_address_is_stopped_too() -> None:
    users = get_user_model().objects
    for n in range(4):
        users.create_user(username=f"user{n}", password=f"{RIGHT} {n}")
    sprayer = Client(REMOTE_ADDR=ATTACKER)
    # Fewer than LOGIN_FAILURE_LIMIT per name, 32 in all: past the address's limit of 30.
    for n in range(32):
        assert not log_in(sprayer, "/accounts/login/", f"user{n % 4}", f"guess{n}")
    assert not log_in(sprayer, "/accounts/login/", "user0", f"{RIGHT} 0")
    assert not log_in(sprayer, "/accounts/login/", "victim", RIGHT)
    # Elsewhere, the same users still log in.
    assert log_in(Client(REMOTE_ADDR=VICTIM), "/accounts/login/", "user0", f"{RIGHT} 0")
