"""A real platform for browser tests: the web server and a django-q2 cluster on the test's database,
Debian's Chromium driven by Playwright, and screenshots for people to look at."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from tests.conftest import ROOT, Processes, child_env, wait_for
from tests.pages.helpers import PASSWORD

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Platform:
    """The web server and the workers, as separate processes."""

    processes: Processes
    env: dict[str, str]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    web: subprocess.Popen[bytes] | None = None

    def start_web(self) -> None:
        # As deployed (manage.py serve_web); open SSE streams must not hold a stopping server long.
        args = ["serve_web", "--port", str(self.port), "--graceful-seconds", "1"]
        self.web = self.processes.manage("web", args, self.env)
        wait_for(self._answers, timeout=30, what=f"the web server on {self.port}\n{self.processes.logs()}")

    def kill_web(self) -> None:
        """The web server dies at once (every open SSE connection with it), like a crash."""
        assert self.web is not None
        os.killpg(self.web.pid, signal.SIGKILL)
        self.web.wait(timeout=10)

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/accounts/login/", timeout=1) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False


def server_env(media_root: str) -> dict[str, str]:
    """The servers' environment: the suite's ``child_env`` with one page per OCR batch (a safe
    point and a progress step after every page) and quick keep-alives. The browser tests keep one
    platform for their whole module instead of starting it for every test."""
    return child_env(media_root, SSE_KEEPALIVE_SECONDS="2", OCR_BATCH_SIZE="1")


def start_platform(processes: Processes, env: dict[str, str]) -> Platform:
    processes.manage("qcluster", ["qcluster"], env)
    platform = Platform(processes, env, free_port())
    platform.start_web()
    return platform


def log_in(page: Any, platform: Platform, username: str) -> None:
    """Through the login form, as a person would."""
    page.goto(f"{platform.url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{platform.url}/")


def screenshot(page: Any, name: str) -> None:
    """``name``-desktop.png and ``name``-phone.png of the page as it is now (full page)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size
    for label, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(viewport)
        page.screenshot(path=str(SCREENSHOTS / f"{name}-{label}.png"), full_page=True)
    page.set_viewport_size(size)


def upload_through_form(
    page: Any, name: str, data: bytes, title: str = "", mime: str = "application/pdf"
) -> None:
    """Upload on the documents list and land on the document's page."""
    page.get_by_label("File").set_input_files({"name": name, "mimeType": mime, "buffer": data})
    if title:
        page.get_by_label("Title", exact=True).fill(title)  # not the list filter's "Title contains"
    page.get_by_role("button", name="Upload", exact=True).click()
    page.wait_for_url("**/documents/*/")
