"""``manage.py run_platform`` as ``make run`` starts it: a command run beside the platform with
``--then`` is reaped when it ends, and the terminal says so and that the platform goes on."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from jobs.proctree import parents
from tests.api.conftest import free_port
from tests.conftest import Processes

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


def state_of(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def children_running(pid: int, command: str) -> list[int]:
    found = []
    for child, parent in parents().items():
        try:
            line = Path(f"/proc/{child}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if parent == pid and command in line:
            found.append(child)
    return found


def test_a_then_command_that_ended_is_reaped_and_announced(processes: Processes, subprocess_env):
    port = free_port()
    platform = processes.manage(
        "platform", ["run_platform", "--port", str(port), "--then", "check_jobs"], subprocess_env
    )
    deadline = time.monotonic() + 60
    follower: list[int] = []
    while not follower:
        follower = children_running(platform.pid, "check_jobs")
        assert time.monotonic() < deadline, processes.logs()
        time.sleep(0.05)
    while state_of(follower[0]) not in (None, "Z"):  # until check_jobs has ended
        assert platform.poll() is None, processes.logs()
        assert time.monotonic() < deadline, processes.logs()
        time.sleep(0.2)
    time.sleep(1.5)  # a few turns of the platform's loop

    assert platform.poll() is None  # the platform goes on
    assert state_of(follower[0]) is None, "the ended command is left a zombie"
    said = (processes.tmp_path / "platform-0.log").read_text()
    assert f"`check_jobs`: done. The platform keeps running: http://127.0.0.1:{port}/" in said
