"""The sandbox's fork server: one interpreter start per worker, a fresh forked process per call.

Each call runs in a process forked from a server that has never read a document, behind the same
walls; a call that crashes, runs out of memory or loops fails with its own cause and the next
document still parses; nothing one call leaves (a file, a process) reaches the next. A server
that is itself killed is not the document's failure: the call is made again on a fresh one.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_django.fixtures import Settings as DjangoSettings

from documents.engines.sniff import Kind
from documents.sandbox import isolation
from documents.sandbox import runner as sandbox
from jobs.errors import StageFailure
from tests.conftest import ROOT, child_env, wait_for
from tests.reliability.helpers import alive, descendants


@pytest.fixture(autouse=True)
def fork_server(settings: DjangoSettings) -> Iterator[None]:
    if not sandbox.sandbox_walls().isolated:
        reason = sandbox.sandbox_walls().reason
        if os.environ.get("REQUIRE_SANDBOX_ISOLATION") == "1":
            pytest.fail(f"REQUIRE_SANDBOX_ISOLATION=1 but the sandbox has no walls here: {reason}")
        pytest.skip(f"the fork server runs walled in only, and the sandbox has no walls here: {reason}")
    settings.DOCUMENTS_SANDBOX_EXTRA_MODULES = ["tests.documents.sandbox_helpers"]
    settings.DOCUMENTS_SANDBOX_FORK_SERVER = True
    sandbox.discard_idle()
    yield
    sandbox.discard_idle()


def server() -> sandbox.Child:
    (idle,) = sandbox._idle
    return idle


def parse_text(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    answer = sandbox.sandbox_call(
        "parse_pages", str(path), Kind.TEXT.value, 0, 50, sandbox.parse_limits().as_dict(), source=path
    )
    page: str = answer["pages"][0]["text"]
    return page


def test_each_call_runs_in_a_fresh_process_forked_from_one_server(tmp_path: Path) -> None:
    assert "first harbor" in parse_text(tmp_path, "first.txt", "The first harbor document.")
    first = sandbox.sandbox_call("test.process")
    running = server()
    assert running.forked
    again = sandbox.sandbox_call("test.process")
    assert "second harbor" in parse_text(tmp_path, "second.txt", "The second harbor document.")
    second = sandbox.sandbox_call("test.process")
    assert len({first["pid"], again["pid"], second["pid"]}) == 3
    # Children of one server, which stayed: its imports were made once.
    assert first["parent"] == again["parent"] == second["parent"]
    assert first["server"] == again["server"] == second["server"]
    assert server() is running


def test_a_call_sees_only_its_own_input(tmp_path: Path) -> None:
    parse_text(tmp_path, "tenant-a.txt", "Tenant A's harbor document.")
    seen = sandbox.sandbox_call("test.look_around")
    assert seen["files"] == ["call"]  # its scratch space holds its own temp folder, nothing earlier
    inbox = server().temp_dir / "input"
    assert len(list(inbox.rglob("*.txt"))) == 0  # a call without input sees no file at all
    assert "Tenant B" in parse_text(tmp_path, "tenant-b.txt", "Tenant B's harbor document.")
    assert [path.name for path in inbox.rglob("*.txt")] == ["tenant-b.txt"]


def test_nothing_a_call_leaves_behind_reaches_the_next() -> None:
    """A subverted child leaves a file in its scratch space and a process that waits for the
    next tenant's call: the server removes both before it answers."""
    assert sandbox.sandbox_call("test.leave_behind") == "left"
    seen = sandbox.sandbox_call("test.look_around")
    assert seen == {"files": ["call"], "processes": []}


@pytest.fixture
def under_scratch() -> Iterator[Path]:
    """A folder under the path of the sandbox's scratch tmpfs (where a fresh checkout, and its
    virtualenv, often live): bound into the walls, it sits on top of the scratch space."""
    folder = Path(tempfile.mkdtemp(prefix="checkout-", dir=isolation.SCRATCH_DIR))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


PROBE_MODULE = """
import os

def beside(folder):
    return sorted(os.listdir(folder))

SANDBOX_ENTRYPOINTS = {"probe.beside": beside}
"""


def test_a_server_whose_walls_hold_a_folder_under_the_scratch_space_serves_call_after_call(
    settings: DjangoSettings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, under_scratch: Path
) -> None:
    """Code bound under the scratch folder (here an entry-point module; in a checkout under it,
    the project and its virtualenv) is not a call's leftover: the server empties the scratch
    space around it, and neither fails nor walks into it, call after call."""
    package = under_scratch / "sandbox_probe_beside"
    package.mkdir(mode=0o755)
    (package / "__init__.py").write_text(PROBE_MODULE)
    (package / "__init__.py").chmod(0o644)
    monkeypatch.syspath_prepend(str(under_scratch))
    monkeypatch.setenv("PYTHONPATH", str(under_scratch))
    settings.DOCUMENTS_SANDBOX_EXTRA_MODULES = ["tests.documents.sandbox_helpers", package.name]
    assert "first" in parse_text(tmp_path, "first.txt", "The first harbor document.")
    running = server()
    assert sandbox.sandbox_call("test.leave_behind") == "left"
    assert sandbox.sandbox_call("probe.beside", str(under_scratch)) == [package.name]
    assert sandbox.sandbox_call("test.look_around")["processes"] == []
    assert "second" in parse_text(tmp_path, "second.txt", "The second harbor document.")
    assert server() is running


SAMPLES_SCRIPT = """
import json, django
django.setup()
from pathlib import Path
from documents.engines.sniff import sniff
from documents.sandbox import runner as sandbox
totals = {}
for path in sorted(Path("documents/samples").iterdir()):
    kind = sniff(path.read_bytes(), filename=path.name).kind
    limits = sandbox.parse_limits().as_dict()
    try:
        answer = sandbox.sandbox_call("parse_pages", str(path), kind, 0, 50, limits, source=path)
        totals[path.name] = answer["total"]
    except Exception as exc:
        totals[path.name] = f"{type(exc).__name__}: {exc}"
forked = [idle.forked for idle in sandbox._idle]
print(json.dumps({"root": str(sandbox._PROJECT_ROOT), "forked": forked, "totals": totals}))
"""


@pytest.mark.slow
def test_a_fresh_checkout_under_the_scratch_folder_parses_every_sample_with_the_run_settings(
    under_scratch: Path,
) -> None:
    """What ``make run`` does first in a checkout under /tmp: its own settings and limits (no
    test settings, no environment overrides), each bundled sample parsed through the fork server
    by the checkout's own sandbox code."""
    checkout = under_scratch
    for package in isolation.CHILD_PACKAGES:
        shutil.copytree(ROOT / package, checkout / package, ignore=shutil.ignore_patterns("__pycache__"))
    keep = ("PATH", "LANG", "LC_ALL", "VIRTUAL_ENV")
    env = {key: value for key, value in os.environ.items() if key in keep}
    env |= {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "SECRET_KEY": "a-fresh-checkout-" + os.urandom(16).hex(),
        "PYTHONPATH": os.pathsep.join([str(checkout), str(ROOT)]),  # its sandbox code, then the rest
        "HOME": str(checkout),
    }
    done = subprocess.run(
        [sys.executable, "-c", SAMPLES_SCRIPT], env=env, cwd=checkout, capture_output=True, timeout=300
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    outcome = json.loads(done.stdout.decode().splitlines()[-1])
    samples = sorted(path.name for path in (ROOT / "documents" / "samples").iterdir())
    assert sorted(outcome["totals"]) == samples
    assert all(isinstance(total, int) and total >= 1 for total in outcome["totals"].values()), outcome
    assert outcome["root"] == str(checkout)
    assert outcome["forked"] == [True]  # one fork server served them all, and stayed


@pytest.mark.parametrize(
    ("call", "args", "limits", "cause", "same_server"),
    [
        ("test.crash", [], {}, "resource_limit", True),
        ("test.allocate", [2 * 1024**3], {"DOCUMENTS_SANDBOX_MEMORY_BYTES": 1024**3}, "resource_limit", True),
        ("test.burn", [], {"DOCUMENTS_SANDBOX_CPU_SECONDS": 1}, "parse_timeout", False),
        ("test.spin", [600], {"DOCUMENTS_SANDBOX_WALL_SECONDS": 1}, "parse_timeout", False),
    ],
    ids=["crash", "memory", "cpu", "wall"],
)
def test_a_failing_call_fails_with_its_cause_and_the_next_document_parses(
    settings: DjangoSettings,
    tmp_path: Path,
    call: str,
    args: list[Any],
    limits: dict[str, int],
    cause: str,
    same_server: bool,
) -> None:
    """A crash or a memory error ends only the forked child (the server goes on); a call over its
    time has the whole server killed, and the next call gets a new one."""
    for name, value in limits.items():
        setattr(settings, name, value)
    parse_text(tmp_path, "before.txt", "A harbor document before.")
    before = server()
    with pytest.raises(StageFailure) as failure:
        sandbox.sandbox_call(call, *args)
    assert failure.value.cause == cause, str(failure.value)
    assert "after" in parse_text(tmp_path, "after.txt", "A harbor document after.")
    assert (server() is before) == same_server
    if not same_server:
        assert before.process.poll() is not None


def test_a_killed_server_is_replaced_and_the_next_call_parses(tmp_path: Path) -> None:
    parse_text(tmp_path, "before.txt", "A harbor document before.")
    killed = server()
    token = sandbox.sandbox_call("test.process")["server"]
    os.kill(killed.interpreter_pid, signal.SIGKILL)
    wait_for(lambda: not killed.alive(), timeout=10, what="the killed server to end")
    assert "after" in parse_text(tmp_path, "after.txt", "A harbor document after.")
    assert server() is not killed and server().forked
    assert sandbox.sandbox_call("test.process")["server"] != token
    assert killed.process.poll() is not None and not killed.temp_dir.exists()


def servers_here() -> list[int]:
    """The fork servers this process started, by pid: other processes' servers are never touched.
    A server's interpreter names itself ``sandbox-server`` once its imports are done; a process
    it forks for a call bears that name too until it renames itself, but its parent is a server."""
    names: dict[int, str] = {}
    parents: dict[int, int] = {}
    for pid in descendants(os.getpid()):
        with contextlib.suppress(OSError):  # it may have ended meanwhile
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            parents[pid] = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            names[pid] = name
    server = "sandbox-server"
    return [pid for pid, name in names.items() if name == server and names.get(parents[pid]) != server]


def test_an_idle_server_killed_between_calls_is_replaced_and_the_next_call_parses(tmp_path: Path) -> None:
    """Killed (the OOM killer, an operator) while it waits for the next call, and that call comes
    at once: whether the worker finds the server dead before it sends the request (then it is
    replaced there) or only when the request meets a closed pipe or no answer, the document parses
    on a fresh server. Three rounds, as the kill may or may not have taken effect by then."""
    parse_text(tmp_path, "before.txt", "A harbor document before.")
    limits = sandbox.parse_limits().as_dict()
    for round_ in range(3):
        killed = server()
        token = sandbox.sandbox_call("test.process")["server"]
        after = tmp_path / f"after-{round_}.txt"
        after.write_text(f"A harbor document after {round_}.")
        os.kill(killed.interpreter_pid, signal.SIGKILL)  # not waited for: it may still look alive
        answer = sandbox.sandbox_call("parse_pages", str(after), Kind.TEXT.value, 0, 1, limits, source=after)
        assert f"after {round_}" in answer["pages"][0]["text"]
        assert server() is not killed and server().forked
        assert sandbox.sandbox_call("test.process")["server"] != token
        assert killed.process.poll() is not None and not killed.temp_dir.exists()


def test_a_request_to_a_server_that_ended_says_the_server_ended_and_its_kill_raises_nothing() -> None:
    """The request meets the pipe of a server that ended after it was last found alive: not the
    call's failure, and what is left of the server (a request in a pipe's buffer that cannot be
    flushed) is cleaned up without an error."""
    ended = sandbox.Child(None)
    os.kill(ended.interpreter_pid, signal.SIGKILL)
    wait_for(lambda: ended.process.poll() is not None, timeout=10, what="the killed server to end")
    with pytest.raises(sandbox.ServerEnded):
        ended.call("test.process", [], check=lambda: None, wall_seconds=30)
    ended.kill()  # once more: its pipes are closed
    assert not ended.temp_dir.exists()


def test_a_server_killed_during_a_call_has_the_call_made_again_once_on_a_fresh_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    token = sandbox.sandbox_call("test.process")["server"]
    first = server()
    killed: list[int] = []
    seen: set[int] = set()

    def kill_the_first_server() -> None:  # the call's safe point, every 0.1 s while it works
        seen.update(servers_here())
        if not killed:
            os.kill(first.interpreter_pid, signal.SIGKILL)
            killed.append(first.interpreter_pid)

    answer = sandbox.sandbox_call("test.wait", 2, check=kill_the_first_server)
    assert killed == [first.interpreter_pid]
    assert answer["server"] != token  # answered by another server
    assert len(seen) == 2  # the killed one and one fresh one: the call was made again once
    ended = [r.getMessage() for r in caplog.records if r.name == "documents.sandbox.runner"]
    assert len(ended) == 1 and f"fork server (pid {first.pid}) ended during a call" in ended[0]
    assert first.process.poll() is not None
    assert server() is not first and server().forked


def test_servers_that_end_on_every_attempt_fail_the_call_as_sandbox_failed(tmp_path: Path) -> None:
    """Not ``resource_limit``, which would count against the document: the platform failed, and
    the engine retries ``sandbox_failed`` later."""
    sandbox.sandbox_call("test.process")
    killed: set[int] = set()

    def kill_every_server() -> None:
        for pid in servers_here():
            if pid not in killed:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)

    with pytest.raises(StageFailure) as failure:
        sandbox.sandbox_call("test.wait", 2, check=kill_every_server)
    assert failure.value.cause == "sandbox_failed", str(failure.value)
    assert len(killed) == sandbox.SERVER_ATTEMPTS == 2
    assert "after" in parse_text(tmp_path, "after.txt", "A harbor document after.")


def test_a_call_may_not_end_its_server() -> None:
    """A subverted call that ended its server would have its document run on server after server
    (a server that ends is not the call's failure): signals to the server, the namespace's first
    process, the call's group and every process are refused, and so is a handle to the server."""
    sandbox.sandbox_call("test.process")
    running = server()
    outcome = sandbox.sandbox_call("test.end_the_server")
    assert outcome == dict.fromkeys(["server", "first", "group", "every", "handle"], "refused")
    assert server() is running and running.alive()


def test_no_server_remains_after_its_worker_exits() -> None:
    script = (
        "import django; django.setup()\n"
        "from documents.sandbox import runner as sandbox\n"
        "sandbox.sandbox_call('test.process')\n"
        "(idle,) = sandbox._idle\n"
        "print(idle.forked, idle.pid, idle.interpreter_pid, flush=True)\n"
    )
    env = child_env(DOCUMENTS_SANDBOX_EXTRA_MODULES="tests.documents.sandbox_helpers")
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    forked, wrapper, interpreter = done.stdout.decode().split()
    assert forked == "True"
    wait_for(
        lambda: not alive(int(wrapper)) and not alive(int(interpreter)),
        timeout=10,
        what="the worker's sandbox processes to end",
    )


def test_a_server_whose_folder_was_swept_is_replaced(tmp_path: Path) -> None:
    """The temp sweep removes a folder idle for long; the input folder bound into the server's
    walls then cannot be refilled, so the next call gets a new server."""
    parse_text(tmp_path, "before.txt", "A harbor document before.")
    sandbox.sandbox_call("test.process")  # a call without input: no copy left to miss
    swept = server()
    sandbox._remove_tree(swept.temp_dir)
    assert "after" in parse_text(tmp_path, "after.txt", "A harbor document after.")
    assert server() is not swept


def test_a_warm_call_keeps_a_child_for_its_input_beside_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OCR's calls keep their engine and the open PDF between one document's pages: they get a
    child per input file, and the server waits beside it for the next parse."""
    monkeypatch.setattr(sandbox, "WARM_CALLS", frozenset({"test.process"}))
    first = tmp_path / "scan.txt"
    first.write_text("A scanned harbor page.")
    parse_text(tmp_path, "scan.txt", "A scanned harbor page.")
    running = server()
    one = sandbox.sandbox_call("test.process", source=first)
    two = sandbox.sandbox_call("test.process", source=first)
    assert one == two  # the same warm child for the same input
    assert {idle.forked for idle in sandbox._idle} == {True, False}
    parse_text(tmp_path, "next.txt", "The next harbor document.")
    assert sandbox._idle == [running]  # the other input's child retired, the server reused


def test_the_server_refuses_to_run_outside_a_pid_namespace_of_its_own() -> None:
    """There, ending what a call left behind (``kill(-1)``) would end every process of the
    worker's user: the server exits before it forks anything."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "documents.sandbox.forkserver", "1", "0", "0", "0", "0"],
        env=env,
        input=b"",
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 2
