"""The parsing sandbox: a real child process under real resource limits, killed when it must be."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_django.fixtures import Settings as DjangoSettings

from documents.engines.sniff import Kind
from documents.sandbox import runner as sandbox
from jobs.errors import CancelRequested, StageFailure
from tests.conftest import ROOT, child_env, wait_for
from tests.documents import files
from tests.reliability.helpers import alive, children


@pytest.fixture(autouse=True)
def test_entrypoints(settings: DjangoSettings) -> Iterator[None]:
    settings.DOCUMENTS_SANDBOX_EXTRA_MODULES = ["tests.documents.sandbox_helpers"]
    sandbox.discard_idle()
    yield
    sandbox.discard_idle()


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_pages_come_back_from_the_child(tmp_path: Path) -> None:
    path = files.save(tmp_path, "doc.pdf", files.text_pdf(["First harbor page.", "Second harbor page."]))
    answer = sandbox.sandbox_call(
        "parse_pages", str(path), Kind.PDF.value, 1, 50, sandbox.parse_limits().as_dict(), source=path
    )
    assert answer["total"] == 2
    assert [page["number"] for page in answer["pages"]] == [2]
    assert "Second harbor page." in answer["pages"][0]["text"]


def test_the_child_sees_none_of_the_workers_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_KEY", "worker-secret")
    monkeypatch.setenv("DATABASE_URL", "postgres://user:password@db/prod")
    monkeypatch.setenv("EMBEDDINGS_HTTP_API_KEY", "sk-worker")
    names = set(sandbox.sandbox_call("test.environment"))
    assert not names & {"SECRET_KEY", "DATABASE_URL", "EMBEDDINGS_HTTP_API_KEY", "DJANGO_SETTINGS_MODULE"}


def test_a_child_is_reused_and_replaced_after_a_failure(settings: DjangoSettings) -> None:
    """Without the fork server (off, or outside the walls): one child serves an input's calls."""
    settings.DOCUMENTS_SANDBOX_FORK_SERVER = False
    first = sandbox.sandbox_call("test.pid")
    assert sandbox.sandbox_call("test.pid") == first
    with pytest.raises(StageFailure):
        sandbox.sandbox_call("test.crash")
    assert sandbox.sandbox_call("test.pid") != first


def test_a_cancel_kills_a_spinning_child_and_the_waiting_thread_stays_free() -> None:
    """The waiting thread keeps running Python (a heartbeat would go out) while the child spins
    holding its own GIL, and the cancel it learns of ends the child at once."""
    cancel = threading.Event()
    polls = 0

    def check() -> None:
        nonlocal polls
        polls += 1
        if cancel.is_set():
            raise CancelRequested()

    outcome: list[BaseException] = []

    def call() -> None:
        try:
            sandbox.sandbox_call("test.spin", 600, check=check)
        except BaseException as exc:
            outcome.append(exc)

    before = set(_children())
    thread = threading.Thread(target=call)
    thread.start()
    wait_for(lambda: polls >= 10, timeout=30, what="the waiting thread to poll while the child spins")
    (spinner,) = set(_children()) - before
    cancel.set()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert isinstance(outcome[0], CancelRequested)
    wait_for(lambda: gone(spinner), timeout=5, what="the spinning child to be killed")


def test_a_call_over_its_wall_time_is_a_parse_timeout(settings: DjangoSettings) -> None:
    settings.DOCUMENTS_SANDBOX_WALL_SECONDS = 0.5
    with pytest.raises(StageFailure) as failure:
        sandbox.sandbox_call("test.spin", 600)
    assert failure.value.cause == "parse_timeout"


def test_a_child_over_its_cpu_time_is_a_parse_timeout(settings: DjangoSettings) -> None:
    settings.DOCUMENTS_SANDBOX_CPU_SECONDS = 1
    settings.DOCUMENTS_SANDBOX_WALL_SECONDS = 120
    with pytest.raises(StageFailure) as failure:
        sandbox.sandbox_call("test.burn")
    assert failure.value.cause == "parse_timeout"
    assert sandbox.CPU_TIME_USED_UP in str(failure.value)


def test_a_call_over_its_cpu_budget_is_killed_even_when_the_child_lifts_its_own_limit(
    settings: DjangoSettings,
) -> None:
    """A subverted child raises its soft CPU limit as far as it may and ignores SIGXCPU: the
    worker, which counts the call's CPU time from outside, still ends it at the call's budget
    (not at the child's lifetime limit, several budgets later), with the usual refusal."""
    settings.DOCUMENTS_SANDBOX_CPU_SECONDS = 1
    settings.DOCUMENTS_SANDBOX_WALL_SECONDS = 120  # only the CPU budget may end it
    before = set(_children())
    with pytest.raises(StageFailure) as failure:
        sandbox.sandbox_call("test.escape_cpu")
    assert failure.value.cause == "parse_timeout", str(failure.value)
    message = str(failure.value)
    assert message.startswith(sandbox.CPU_TIME_USED_UP) and message.endswith("child killed"), message
    used = float(message.split(": ", 1)[1].split("s of", 1)[0])
    # Over its budget (shown to a tenth of a second, so 1.0 can stand for 1.04), and far below
    # the 6 s or so its lifetime limit would have let it reach.
    assert 1 <= used < 2.5, message
    assert set(_children()) <= before


def test_a_child_that_used_more_than_a_budget_over_several_calls_still_serves_a_full_call(
    settings: DjangoSettings,
) -> None:
    """The budget is per call: CPU a warm child spent on earlier calls does not count against
    the next one."""
    settings.DOCUMENTS_SANDBOX_CPU_SECONDS = 1
    settings.DOCUMENTS_SANDBOX_WALL_SECONDS = 120
    first = sandbox.sandbox_call("test.pid")
    for _ in range(3):  # 1.8 s of CPU in all: more than one budget
        assert sandbox.sandbox_call("test.burn_cpu", 0.6) == "burnt"
        assert sandbox.sandbox_call("test.pid") == first
    assert sandbox.sandbox_call("test.burn_cpu", 0.8) == "burnt"  # most of a whole budget
    assert sandbox.sandbox_call("test.pid") == first


def test_a_child_still_working_after_its_answer_is_not_given_another_call(settings: DjangoSettings) -> None:
    """Without the fork server (whose forked children end with their answer)."""
    settings.DOCUMENTS_SANDBOX_FORK_SERVER = False
    settings.DOCUMENTS_SANDBOX_CPU_SECONDS = 30
    first = sandbox.sandbox_call("test.spin_behind")  # answers, and leaves a thread spinning
    (idle,) = sandbox._idle
    rested = idle.cpu_used()
    assert sandbox.IDLE_CPU_SECONDS < 1
    wait_for(lambda: idle.cpu_used() > rested + 1, timeout=60, what="the idle child to use a CPU second")
    assert sandbox.sandbox_call("test.pid") != first
    assert idle.process.poll() is not None  # killed, not left spinning


def test_a_child_over_its_memory_is_a_resource_limit(settings: DjangoSettings) -> None:
    settings.DOCUMENTS_SANDBOX_MEMORY_BYTES = 1024**3
    with pytest.raises(StageFailure) as failure:
        sandbox.sandbox_call("test.allocate", 2 * 1024**3)
    assert failure.value.cause == "resource_limit"


def test_a_crashed_child_is_a_resource_limit() -> None:
    with pytest.raises(StageFailure) as failure:
        sandbox.sandbox_call("test.crash")
    assert failure.value.cause == "resource_limit"


def _children() -> list[int]:
    """Live child processes of this process (from /proc)."""
    mine = str(os.getpid())
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[1] == mine and fields[0] != "Z":
            found.append(int(entry))
    return found


def test_a_child_dies_with_its_worker(tmp_path: Path) -> None:
    """A worker SIGKILLed mid-parse (the OOM killer, a chaos test) takes its spinning child along."""
    script = (
        "import django; django.setup()\n"
        "from documents.sandbox import runner as sandbox\n"
        "sandbox.sandbox_call('test.spin', 600)\n"
    )
    env = child_env(DOCUMENTS_SANDBOX_EXTRA_MODULES="tests.documents.sandbox_helpers")
    worker = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=ROOT)
    try:
        found = wait_for(lambda: children(worker.pid), timeout=30, what="the worker's sandbox child")
        (child,) = found
        worker.kill()
        worker.wait(timeout=10)
        wait_for(lambda: gone(child) or not alive(child), timeout=10, what="the orphaned child to die")
    finally:
        if worker.poll() is None:
            worker.kill()
