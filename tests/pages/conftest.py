"""Fixtures for the HTML pages: logged-in members of two tenants, and the browser switch.

Browser tests (marked ``browser``) skip when Debian's Chromium or Playwright is missing, unless
``REQUIRE_BROWSER=1`` makes that a failure.
"""

from __future__ import annotations

import os

import pytest

from tests.pages.browser import CHROMIUM
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


@pytest.fixture
def alice(transactional_db: None) -> Member:
    return make_member("alice", "acme")


@pytest.fixture
def bob(transactional_db: None) -> Member:
    """A member of another tenant."""
    return make_member("bob", "globex")
