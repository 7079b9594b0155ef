"""``manage.py run_platform`` as ``make run`` starts it: a command run beside the platform with
``--then`` is reaped when it ends, and the terminal says so and that the platform goes on."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.proctree import parents
from tests.api.conftest import free_port
from tests.conftest import Processes, wait_for

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
    (follower,) = wait_for(lambda: children_running(platform.pid, "check_jobs"), timeout=60, what="--then")
    announced = f"`check_jobs`: done. The platform keeps running: http://127.0.0.1:{port}/"
    log = processes.tmp_path / "platform-0.log"
    # The ended command is reaped (no zombie left) and announced, while the platform goes on.
    wait_for(
        lambda: state_of(follower) is None and announced in log.read_text(),
        timeout=60,
        what="check_jobs reaped and announced",
    )
    assert platform.poll() is None, processes.logs()
