"""Fixtures of the operator-console tests: staff users with and without the job permissions,
logged-in clients, and a clock for figures that depend on time."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from io import StringIO
from unittest import mock

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

VIEW = "view_job"
OPERATE = "change_job"
TAKEOVER = "takeover_job"
FORCE = "force_retry_job"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "browser: drives a real Chromium through Playwright (screenshots)")


def make_staff(username: str, *codenames: str, app: str = "jobs") -> User:
    user = User.objects.create_user(username=username, password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label=app, codename__in=codenames))
    return user


def login(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def check_output() -> str:
    """What ``manage.py check`` prints (its warnings go to stderr)."""
    out, err = StringIO(), StringIO()
    call_command("check", stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


def health_page() -> str:
    """The admin's health page as a staff member who may view jobs sees it."""
    user = User.objects.filter(username="ops").first() or make_staff("ops", VIEW)
    response = login(user).get(reverse("admin:jobs_health"))
    assert response.status_code == 200
    return response.content.decode()


@pytest.fixture
def viewer() -> Client:
    """Staff who may look at jobs but not act."""
    return login(make_staff("vera", VIEW))


@pytest.fixture
def operator() -> Client:
    """Staff with the routine actions only (no takeover, no forced retry)."""
    return login(make_staff("olga", VIEW, OPERATE))


@pytest.fixture
def senior() -> Client:
    """Staff with every job permission."""
    return login(make_staff("sam", VIEW, OPERATE, TAKEOVER, FORCE))


@pytest.fixture
def taker() -> Client:
    """Staff who may take over stalled jobs but not run the routine actions."""
    return login(make_staff("tom", VIEW, TAKEOVER))


class Clock:
    """``django.utils.timezone.now`` under the test's control (services read the time through it)."""

    def __init__(self) -> None:
        self.now = timezone.now()

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now

    def at(self, when: datetime) -> datetime:
        self.now = when
        return when


@pytest.fixture
def clock() -> Iterator[Clock]:
    c = Clock()
    with mock.patch("django.utils.timezone.now", c):
        yield c


MakeUser = Callable[..., User]
