"""Fixtures for the HTML pages: logged-in members of two tenants, and the browser switch.

Browser tests (marked ``browser``) skip when Debian's Chromium or Playwright is missing, unless
``REQUIRE_BROWSER=1`` makes that a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.pages.browser import CHROMIUM, CHROMIUM_ARGS
from tests.pages.helpers import Member, make_member


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "browser: drives Debian's Chromium through Playwright against a real server"
    )


def browser_available() -> None:
    """Skip (or, with REQUIRE_BROWSER=1, fail) when the browser or Playwright is missing."""
    missing = []
    if not os.path.exists(CHROMIUM):
        missing.append(CHROMIUM)
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright package")
    if missing:
        reason = f"browser tests need {' and '.join(missing)}"
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="module")
def chromium(django_db_setup: None) -> Iterator[Any]:
    """Debian's Chromium through Playwright, one per test module."""
    browser_available()
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop running in this thread, so Django would take the
    # tests' own (plain synchronous) ORM calls for calls from async code. Only while the module's
    # browser runs; the servers under test get an environment without it (tests.pages.browser.server_env).
    with pytest.MonkeyPatch.context() as patch, sync_playwright() as playwright:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def alice(transactional_db: None) -> Member:
    return make_member("alice", "acme")


@pytest.fixture
def bob(transactional_db: None) -> Member:
    """A member of another tenant."""
    return make_member("bob", "globex")
