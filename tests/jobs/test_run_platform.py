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
    # ``diffsettings`` touches no database: how long it takes, and how it ends, does not depend on
    # what the platform's own processes are writing meanwhile on a loaded machine.
    port = free_port()
    platform = processes.manage(
        "platform", ["run_platform", "--port", str(port), "--then", "diffsettings"], subprocess_env
    )
    announced = f"`diffsettings`: done. The platform keeps running: http://127.0.0.1:{port}/"
    log = processes.tmp_path / "platform-0.log"
    try:
        wait_for(lambda: announced in log.read_text(), timeout=120, what="diffsettings announced")
    except AssertionError as timed_out:
        raise AssertionError(f"{timed_out}\n{processes.logs()}") from None
    # Announced once reaped: no child of the platform is left a zombie, and the platform goes on.
    zombies = [
        child for child, parent in parents().items() if parent == platform.pid and state_of(child) == "Z"
    ]
    assert zombies == [], processes.logs()
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
