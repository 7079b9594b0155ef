"""The parsing sandbox as a boundary: a subverted child reaches nothing but its input.

Each test runs a hostile "parser" (tests/documents/hostile_parser.py) through the real runner and
the real ``parse_pages`` entry point, in a walled-in child, as code injected through a memory bug
in a real parser would run: it tries to read the secret key, another tenant's stored file and the
database, to reach PostgreSQL and the network, to fork without end, to fill the disk and to lift
its CPU limit. Every attempt must fail while an ordinary document still parses. Each target is
first shown to be there for the worker, so a passing test never means "nothing to steal".
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from pytest_django.fixtures import Settings as DjangoSettings

from documents.engines.sniff import Kind
from documents.sandbox import runner as sandbox
from tests.documents import files


@pytest.fixture(autouse=True)
def walled(settings: DjangoSettings) -> Iterator[None]:
    if not sandbox.sandbox_walls().isolated:
        reason = sandbox.sandbox_walls().reason
        if os.environ.get("REQUIRE_SANDBOX_ISOLATION") == "1":
            pytest.fail(f"REQUIRE_SANDBOX_ISOLATION=1 but the sandbox has no walls here: {reason}")
        pytest.skip(f"the sandbox has no walls here: {reason}")
    settings.DOCUMENTS_SANDBOX_EXTRA_MODULES = ["tests.documents.hostile_parser"]
    sandbox.discard_idle()
    yield
    sandbox.discard_idle()


def attack(tmp_path: Path, name: str, target: str = "") -> dict[str, Any]:
    """Run attack ``name`` on ``target`` in the sandbox child; what it reports."""
    order = tmp_path / f"{name}-{secrets.token_hex(3)}.hostile"
    order.write_text(json.dumps({"attack": name, "target": target}))
    answer = sandbox.sandbox_call(
        "parse_pages", str(order), "hostile", 0, 1, sandbox.parse_limits().as_dict(), source=order
    )
    outcome: dict[str, Any] = json.loads(answer["pages"][0]["text"])
    return outcome


def still_parses(tmp_path: Path) -> None:
    path = files.save(tmp_path, "ordinary.pdf", files.text_pdf(["An ordinary harbor page."]))
    answer = sandbox.sandbox_call(
        "parse_pages", str(path), Kind.PDF.value, 0, 50, sandbox.parse_limits().as_dict(), source=path
    )
    assert "An ordinary harbor page." in answer["pages"][0]["text"]


@pytest.fixture
def secret_file(settings: DjangoSettings) -> Iterator[Path]:
    """A key file where the embedded default keeps ``var/secret_key``."""
    path = Path(settings.VAR_DIR) / f"secret_key-sandbox-test-{os.getpid()}"
    path.write_text("the-deployment-secret")
    path.chmod(0o600)
    yield path
    path.unlink()


def test_the_child_cannot_read_the_secret_key(tmp_path: Path, secret_file: Path) -> None:
    assert secret_file.read_text() == "the-deployment-secret"
    outcome = attack(tmp_path, "read", str(secret_file))
    assert outcome["done"] is False and outcome["error"] == "FileNotFoundError", outcome
    assert attack(tmp_path, "read", str(Path(secret_file).parent))["done"] is False
    still_parses(tmp_path)


def test_the_child_cannot_read_another_tenants_stored_file(tmp_path: Path) -> None:
    name = default_storage.save(f"sandbox-test/other-tenant-{os.getpid()}.txt", ContentFile(b"tenant B only"))
    try:
        stored = Path(default_storage.path(name))
        assert stored.read_bytes() == b"tenant B only"
        outcome = attack(tmp_path, "read", str(stored))
        assert outcome["done"] is False, outcome
    finally:
        default_storage.delete(name)
    still_parses(tmp_path)


def test_the_child_cannot_open_the_database_file(tmp_path: Path, settings: DjangoSettings) -> None:
    path = Path(settings.VAR_DIR) / f"sandbox-test-{os.getpid()}.sqlite3"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE IF NOT EXISTS documents_secret (value TEXT)")
    try:
        outcome = attack(tmp_path, "database", str(path))
        assert outcome["done"] is False, outcome
    finally:
        path.unlink()
    still_parses(tmp_path)


def test_the_child_cannot_reach_postgresql_or_open_a_network_socket(tmp_path: Path) -> None:
    try:
        socket.create_connection(("127.0.0.1", 5432), timeout=3).close()
    except OSError:
        if os.environ.get("REQUIRE_POSTGRES") == "1":
            raise
        pytest.skip("no PostgreSQL on 127.0.0.1:5432 to try to reach")
    outcome = attack(tmp_path, "connect", "127.0.0.1:5432")
    assert outcome["done"] is False and outcome["error"] == "PermissionError", outcome
    outcome = attack(tmp_path, "socket", "10.0.0.1")
    assert outcome["done"] is False and outcome["error"] == "PermissionError", outcome
    still_parses(tmp_path)


def test_a_fork_bomb_stops_at_the_process_limit(tmp_path: Path, settings: DjangoSettings) -> None:
    if os.geteuid() == 0 and settings.DOCUMENTS_SANDBOX_UID == 0:
        pytest.skip("RLIMIT_NPROC does not bind root")
    settings.DOCUMENTS_SANDBOX_PROCESSES = 32
    outcome = attack(tmp_path, "fork_bomb", "2000")
    assert outcome["done"] is False and outcome["error"] == "BlockingIOError", outcome
    assert outcome["made"] < 32
    still_parses(tmp_path)


def test_a_huge_file_stops_at_the_file_size_limit(tmp_path: Path, settings: DjangoSettings) -> None:
    settings.DOCUMENTS_SANDBOX_FILE_BYTES = 4 * 1024**2
    outcome = attack(tmp_path, "huge_file", str(64 * 1024**2))
    assert outcome["done"] is False and outcome["made"] <= 4 * 1024**2, outcome
    assert "File too large" in outcome["detail"], outcome
    still_parses(tmp_path)


def test_the_child_cannot_lift_its_cpu_limit(tmp_path: Path) -> None:
    outcome = attack(tmp_path, "raise_cpu")
    assert outcome["done"] is False and outcome["error"] == "ValueError", outcome
    soft, hard = outcome["limits"]
    assert 0 < soft < hard < 10 * 3600, outcome  # a finite hard limit the child cannot lift
    # Nor its soft limit up to the hard one (what the rules of limits allow): the syscall filter
    # refuses every change of a limit. (Each call's budget is the worker's to enforce anyway.)
    outcome = attack(tmp_path, "raise_soft_cpu")
    assert outcome["done"] is False and outcome["limits"] == [soft, hard], outcome
    still_parses(tmp_path)


def test_the_syscall_filter_refuses_a_new_namespace(tmp_path: Path) -> None:
    outcome = attack(tmp_path, "new_namespace")
    assert outcome == {"done": False, "error": "EPERM"}, outcome
    still_parses(tmp_path)


def test_the_child_has_no_django_no_settings_and_no_secrets_in_its_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECRET_KEY", "worker-secret")
    monkeypatch.setenv("DATABASE_URL", "postgres://user:password@db/prod")
    outcome = attack(tmp_path, "settings_loaded")
    assert outcome["done"] is False, "the child imported Django"
    assert not set(outcome["environment"]) & {"SECRET_KEY", "DATABASE_URL", "DJANGO_SETTINGS_MODULE"}


def test_a_project_under_the_scratch_folder_stays_visible_to_the_child(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A checkout or virtualenv under /tmp is bound on top of the child's scratch tmpfs, not
    hidden under it (the child would not find its interpreter and the walls would be off)."""
    from documents.sandbox import isolation

    monkeypatch.setattr(isolation, "_python_paths", lambda: ["/tmp/checkout/.venv"])
    monkeypatch.setattr(os.path, "isdir", lambda path: True)
    arguments = isolation.mount_arguments(isolation.Layout(uid=65534, scratch_bytes=1024), None)
    scratch = arguments.index("--tmpfs")
    binds = [
        i for i, arg in enumerate(arguments) if arg == "--ro-bind" and arguments[i + 1].startswith("/tmp/")
    ]
    assert binds and all(scratch < i for i in binds), arguments
