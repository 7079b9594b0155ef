"""Safe defaults: no start without a real secret key unless DEBUG,
``check --deploy`` clean with the production environment set, the web server not trusting proxy headers
unless proxies are named. Each runs a real ``manage.py`` on ``config.settings``."""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client
from pytest_django.fixtures import Settings as DjangoSettings

from config.edge import trusted_proxies
from tests.conftest import ROOT

# Starts manage.py commands in subprocesses: left out of the fast tier.
pytestmark = pytest.mark.slow


def run_manage(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    unset = ("SECRET_KEY", "SECRET_KEY_FILE", "DEBUG", "DATABASE_URL")
    base = {k: v for k, v in os.environ.items() if k not in unset}
    full = {
        **base,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "VAR_DIR": str(tmp_path / "var"),
        "PYTHONPATH": str(ROOT),
        **env,
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )


# A deployment names its database; "check" does not connect to it.
DEPLOYMENT = {"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/unused"}


def test_a_deployment_without_a_secret_key_refuses_to_start(tmp_path: Path) -> None:
    result = run_manage(tmp_path, "check", **DEPLOYMENT)
    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr


def test_the_embedded_default_keeps_one_key_under_var_for_every_command(tmp_path: Path) -> None:
    """The README's commands run as written in a second terminal beside ``make run``: with no
    key named, each command of the embedded default reads (or first creates) ``var/secret_key``."""
    assert run_manage(tmp_path, "check").returncode == 0
    key_file = tmp_path / "var" / "secret_key"
    first = key_file.read_text()
    assert len(first) >= 50
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert run_manage(tmp_path, "check").returncode == 0
    assert key_file.read_text() == first


def test_the_old_public_default_key_is_refused_too(tmp_path: Path) -> None:
    result = run_manage(tmp_path, "check", SECRET_KEY="insecure-development-key-set-SECRET_KEY-in-production")
    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr


def test_debug_starts_without_a_key(tmp_path: Path) -> None:
    assert run_manage(tmp_path, "check", DEBUG="1", **DEPLOYMENT).returncode == 0


def test_a_key_file_is_created_private_once_and_kept(tmp_path: Path) -> None:
    key_file = tmp_path / "var" / "secret_key"
    assert run_manage(tmp_path, "check", SECRET_KEY_FILE=str(key_file)).returncode == 0
    first = key_file.read_text()
    assert len(first) >= 50
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert run_manage(tmp_path, "check", SECRET_KEY_FILE=str(key_file)).returncode == 0
    assert key_file.read_text() == first


def test_check_deploy_is_clean_with_the_production_environment(tmp_path: Path) -> None:
    result = run_manage(
        tmp_path,
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS="docs.example.org",
        SECURE_SSL_REDIRECT="1",
        SECURE_HSTS_SECONDS="31536000",
        SECURE_HSTS_INCLUDE_SUBDOMAINS="1",
        SECURE_HSTS_PRELOAD="1",
        SECURE_COOKIES="1",
        CONTENT_SECURITY_POLICY="default-src 'self'",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_warns_without_it(tmp_path: Path) -> None:
    result = run_manage(
        tmp_path, "check", "--deploy", "--fail-level", "WARNING", SECRET_KEY=secrets.token_urlsafe(50)
    )
    assert result.returncode != 0
    assert "security.W004" in result.stderr  # no HSTS


@pytest.mark.parametrize("trusted", ["", "10.0.0.5"])
def test_proxy_headers_are_trusted_only_from_named_proxies(
    monkeypatch: pytest.MonkeyPatch, trusted: str
) -> None:
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", trusted)
    assert trusted_proxies() == trusted


@pytest.mark.django_db
def test_the_content_security_policy_comes_from_the_environment(
    client: Client, settings: DjangoSettings
) -> None:
    assert "Content-Security-Policy" not in client.get("/accounts/login/")
    settings.CONTENT_SECURITY_POLICY = "default-src 'self'"
    assert client.get("/accounts/login/")["Content-Security-Policy"] == "default-src 'self'"
