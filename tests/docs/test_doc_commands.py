"""Every command in the README and in ``docs/`` runs as written.

A page's fenced ``sh`` blocks, in order, are one bash script (so a variable set by one block
is there in the next); a ``python`` block runs with the project's interpreter inside that same
script. The script runs in a scratch folder that holds what a checkout has (``.venv``,
``manage.py``, ``documents/samples``) against a platform started the way ``make run`` starts it:
the embedded default (SQLite and files under its own ``var/``, the default embedder), demo
workspace included, and ``WEBHOOK_ALLOW_PRIVATE=1`` as the API page asks for its local webhook
receiver. The only rewrite is the port: ``127.0.0.1:8000`` becomes the test's port.
``curl`` fails on an HTTP error answer, so a command the docs show succeeding must succeed.

Blocks fenced ``sh server`` start something long-running (``make run``, a deployment's
processes): they cannot run inside a test, so each of their commands is checked to exist
instead (a make target with ``make -n``, a management command with ``--help``).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT, Processes, is_postgres, wait_for

# The docs describe the embedded default (SQLite under var/): the PostgreSQL pass has nothing
# more to run here.
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(is_postgres(), reason="the docs run on the embedded default"),
]

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([\w-]*)[ \t]*([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
DOC_ORIGIN = "127.0.0.1:8000"


@dataclass(frozen=True)
class Block:
    language: str
    role: str
    text: str


def blocks(page: Path) -> list[Block]:
    return [Block(m[1], m[2].strip(), m[3]) for m in FENCE.finditer(page.read_text())]


def script(page: Path, origin: str) -> str:
    """The page's runnable blocks as one bash script."""
    parts = [
        "set -euo pipefail",
        # An HTTP error answer is a failed command, and the body still shows in the log.
        'curl() { command curl --silent --show-error --fail-with-body "$@"; }',
    ]
    for block in blocks(page):
        if block.role:
            continue
        if block.language == "sh":
            parts.append(block.text)
        elif block.language == "python":
            parts.append(f"export TOKEN\n.venv/bin/python - <<'DOC_PYTHON'\n{block.text}DOC_PYTHON")
    return "\n".join(parts).replace(DOC_ORIGIN, origin)


def embedded_default_env(var_dir: Path) -> dict[str, str]:
    """The environment of a user's shell: nothing of the test settings, the platform's own var/."""
    drop = {"DJANGO_SETTINGS_MODULE", "SECRET_KEY", "SECRET_KEY_FILE", "DATABASE_URL", "MEDIA_ROOT", "DEBUG"}
    test_only = ("JOBS_", "Q_", "PYTEST")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(test_only)}
    return {**env, "VAR_DIR": str(var_dir), "PYTHONPATH": str(ROOT)}


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Platform:
    home: Path
    origin: str
    env: dict[str, str]


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    home = tmp_path_factory.mktemp("checkout")
    (home / ".venv").symlink_to(ROOT / ".venv")
    (home / "manage.py").symlink_to(ROOT / "manage.py")
    (home / "documents").mkdir()
    (home / "documents" / "samples").symlink_to(ROOT / "documents" / "samples")
    env = embedded_default_env(home / "var")
    python = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv").exists() else sys.executable
    for command in (["migrate", "--noinput"], ["demo_setup"]):
        subprocess.run([python, "manage.py", *command], cwd=home, env=env, check=True, capture_output=True)
    port = free_port()
    procs = Processes(home)
    run = ["manage.py", "run_platform", "--port", str(port)]
    procs.start("platform", run, {**env, "WEBHOOK_ALLOW_PRIVATE": "1"})
    origin = f"127.0.0.1:{port}"

    def answers() -> bool:
        try:
            with urllib.request.urlopen(f"http://{origin}/accounts/login/", timeout=2) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    try:
        try:
            wait_for(answers, timeout=120, what="the platform to answer")
        except AssertionError as late:
            raise AssertionError(f"{late}\n{procs.logs()}") from None
        yield Platform(home, origin, env)
    finally:
        procs.stop_all()


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_command_of_the_page_runs_as_written(page: Path, platform: Platform) -> None:
    text = script(page, platform.origin)
    result = subprocess.run(
        ["bash", "-c", text], cwd=platform.home, env=platform.env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, f"{page.name} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_long_running_command_exists(page: Path, tmp_path: Path) -> None:
    for block in blocks(page):
        if block.role != "server":
            continue
        for line in block.text.splitlines():
            command = line.split("#", 1)[0].strip()
            if not command:
                continue
            words = [w for w in shlex.split(command) if "=" not in w or w.startswith("-")]
            if words[0] == "make":
                check = subprocess.run(["make", "-n", *words[1:]], cwd=ROOT, capture_output=True, text=True)
            else:
                name = words[words.index("manage.py") + 1]
                check = subprocess.run(
                    [sys.executable, "manage.py", name, "--help"],
                    cwd=ROOT,
                    env=embedded_default_env(tmp_path / "var"),
                    capture_output=True,
                    text=True,
                )
            assert check.returncode == 0, f"{page.name}: `{command}` does not run:\n{check.stderr[-2000:]}"


def test_the_pages_are_found_and_hold_commands() -> None:
    """The harness reads what it should: every page is parsed, and the README's first walk and
    the API page hold runnable commands (a fence the pattern misses would silently run nothing)."""
    assert (ROOT / "docs" / "api.md") in PAGES
    runs = {"sh", "python"}
    runnable = {page.name: [b for b in blocks(page) if not b.role and b.language in runs] for page in PAGES}
    assert runnable["README.md"] and runnable["api.md"]
    sample = "```sh\necho one\n```\n\n```sh server\nmake run\n```\n"
    page = ROOT / "var" / "fence-sample.md"
    page.write_text(sample)
    try:
        assert [(b.language, b.role) for b in blocks(page)] == [("sh", ""), ("sh", "server")]
    finally:
        page.unlink()


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_relative_link_leads_to_a_file(page: Path) -> None:
    targets = [t for t in LINK.findall(page.read_text()) if "://" not in t]
    missing = [t for t in targets if not (page.parent / t).exists()]
    assert not missing, f"{page.name} links to missing files: {missing}"
