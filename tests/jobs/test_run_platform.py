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


def environment_of(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(entry.decode(errors="replace").partition("=")[::2] for entry in raw.split(b"\0") if entry)


def test_each_alternative_queue_gets_a_cluster_of_its_own(processes: Processes, subprocess_env, settings):
    """One command starts the jobs' cluster and one cluster per ``ALT_CLUSTERS`` queue."""
    queues = set(settings.Q_CLUSTER["ALT_CLUSTERS"])
    assert queues, "no alternative queue configured"
    platform = processes.manage("platform", ["run_platform", "--port", str(free_port())], subprocess_env)

    def clusters() -> list[str] | None:
        names = sorted(
            environment_of(pid).get("Q_CLUSTER_NAME", "")
            for pid in children_running(platform.pid, "qcluster")
        )
        return names if len(names) == 1 + len(queues) else None

    assert wait_for(clusters, timeout=60, what="the clusters") == sorted(["", *queues])
    assert platform.poll() is None, processes.logs()
