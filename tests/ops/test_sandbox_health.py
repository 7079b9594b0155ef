"""A parsing sandbox without isolation is said out loud: in ``manage.py check``, on the admin's
health page, and (when isolation is required) by refusing to parse."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import Client
from pytest_django.fixtures import Settings as DjangoSettings

from documents.sandbox import runner as sandbox


@pytest.fixture
def no_bubblewrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A machine without bubblewrap: nothing named bwrap on the PATH."""
    monkeypatch.setenv("PATH", str(tmp_path))
    sandbox.discard_idle()


def ids() -> set[str]:
    return {message.id for message in run_checks(tags=["health"]) if message.id}


def test_without_bubblewrap_check_warns(no_bubblewrap: None) -> None:
    assert not sandbox.sandbox_walls().isolated
    assert "documents.W010" in ids()


@pytest.mark.django_db
def test_without_bubblewrap_the_health_page_warns(no_bubblewrap: None, viewer: Client) -> None:
    html = viewer.get("/admin/jobs/job/health/").content.decode()
    assert "The parsing sandbox has no isolation here" in html


def test_when_isolation_is_required_check_fails_and_nothing_is_parsed(
    no_bubblewrap: None, settings: DjangoSettings
) -> None:
    settings.DOCUMENTS_SANDBOX_REQUIRE_ISOLATION = True
    assert "documents.E010" in ids()
    with pytest.raises(SystemCheckError):
        call_command("check", tags=["health"])
    with pytest.raises(sandbox.SandboxError):
        sandbox.sandbox_call("parse_pages", "/nonexistent", "txt", 0, 1, {})


def test_with_bubblewrap_working_there_is_no_warning() -> None:
    if not sandbox.sandbox_walls().isolated:
        pytest.skip(f"the sandbox has no walls here: {sandbox.sandbox_walls().reason}")
    assert not ids() & {"documents.W010", "documents.E010"}
