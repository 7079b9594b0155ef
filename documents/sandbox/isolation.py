"""The sandbox child's walls: what it can see, reach and become, beyond its resource limits.

A child that a hostile file subverts (a memory-corruption bug in PDFium, libxml2, Pillow or
tesseract) runs code of the attacker's choosing with the child's rights. Resource limits bound
how long and how much it runs; these walls bound what it can reach. The child is started through
bubblewrap (Debian ``bubblewrap``, the ``bwrap`` program) in fresh mount, PID, network, IPC and
UTS namespaces:

- its file system is an empty one holding, read-only, only what an interpreter and the parsers
  need: ``/usr`` (system libraries, tesseract and its language data, fonts), a few files of
  ``/etc`` (the loader's cache, fontconfig), the Python installation and the virtualenv's
  packages, and of the project only the ``documents`` and ``jobs`` packages (plus the top-level
  packages of ``DOCUMENTS_SANDBOX_EXTRA_MODULES``): no ``var/``, no secret key, no database file,
  no other tenant's stored files, no settings;
- its one input file is copied in (read-only) and its scratch space is a size-limited tmpfs;
- it has no network at all (only a loopback of its own): no PostgreSQL, no metadata service;
- when the worker runs as root, the child runs as the unprivileged ``DOCUMENTS_SANDBOX_UID``
  with no capabilities and ``no_new_privs`` (so ``RLIMIT_NPROC`` holds for it); otherwise bubblewrap
  puts it in a user namespace of its own.

The child adds a syscall filter itself (:mod:`documents.sandbox.child`). Where bubblewrap is
missing or cannot create namespaces (a container without the rights), the child runs as before:
limited, but not walled in. ``manage.py check`` and the worker's log say so loudly, and
``DOCUMENTS_SANDBOX_REQUIRE_ISOLATION`` turns that into a refusal to parse at all.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# The project's packages the child imports; nothing else of the project is visible inside.
CHILD_PACKAGES = ("documents", "jobs")
INPUT_DIR = "/sandbox/input"  # inside the child: its one input file, read-only
SCRATCH_DIR = "/tmp"  # inside the child: its tmpfs
# Of /etc only what the loader and font lookup read; never passwd, shadow, ssl keys, database configs.
_ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/fonts", "/etc/alternatives")
_TOP = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


@dataclass(frozen=True, slots=True)
class Walls:
    """What the child of this worker gets: ``bubblewrap``, or ``none`` and why."""

    kind: str
    reason: str = ""

    @property
    def isolated(self) -> bool:
        return self.kind == "bubblewrap"


@dataclass(frozen=True, slots=True)
class Layout:
    """The options of one child's walls (from the worker's settings)."""

    uid: int
    scratch_bytes: int
    extra_modules: tuple[str, ...] = ()


def bwrap() -> str | None:
    return shutil.which("bwrap")


def _symlink_chain(path: str) -> tuple[list[tuple[str, str]], str]:
    """The symlinks met on the way to ``path`` (target, link) and the real path they lead to: the
    child must see ``.venv`` where the interpreter looks for it, even when it is a link elsewhere."""
    links: list[tuple[str, str]] = []
    current = Path("/")
    for part in Path(os.path.abspath(path)).parts[1:]:
        candidate = current / part
        if candidate.is_symlink():
            links.append((os.readlink(candidate), str(candidate)))
            current = Path(os.path.realpath(candidate))
        else:
            current = candidate
    return links, str(current)


def _module_dirs(names: Iterable[str]) -> list[str]:
    """The top-level package folders of the extra entry-point modules (tests, a deployment's)."""
    found = []
    for name in names:
        spec = importlib.util.find_spec(name.split(".")[0])
        if spec is None:
            continue
        if spec.submodule_search_locations:
            found.extend(spec.submodule_search_locations)
        elif spec.origin:
            found.append(spec.origin)
    return found


def _python_paths() -> list[str]:
    """The interpreter, the virtualenv and its site-packages, without the project itself (an
    editable install puts the project root on ``sys.path``: that would show ``var/``)."""
    root = str(PROJECT_ROOT)
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable)]
    prefixes = tuple(os.path.realpath(p).rstrip("/") + "/" for p in (sys.prefix, sys.base_prefix))
    for entry in sys.path:
        if not entry or not os.path.exists(entry):
            continue
        real = os.path.realpath(entry)
        if not real.startswith(prefixes) and not real.endswith(("site-packages", "dist-packages")):
            continue  # a script's own folder (sys.path[0]) and the like: not the child's business
        if real == root or root.startswith(real.rstrip("/") + "/") or real.startswith(root + "/"):
            continue  # the project root, or a folder holding it, or inside it (handled by packages)
        paths.append(entry)
    return paths


def _program_paths() -> list[str]:
    """Tesseract and its language data where they live outside ``/usr`` (a custom build)."""
    found = []
    tesseract = shutil.which("tesseract")
    if tesseract and not os.path.realpath(tesseract).startswith("/usr/"):
        found.append(os.path.dirname(os.path.realpath(tesseract)))
    tessdata = os.environ.get("TESSDATA_PREFIX", "")
    if tessdata and os.path.isdir(tessdata):
        found.append(tessdata)
    return found


def mount_arguments(layout: Layout, input_dir: str | None) -> list[str]:
    """bubblewrap's options for the child's file system (see the module's docstring)."""
    binds: set[str] = set()
    links: dict[str, str] = {}
    for top in _TOP:
        if os.path.islink(top):
            links[top] = os.readlink(top)
        elif os.path.isdir(top):
            binds.add(top)
    binds.add("/usr")
    binds.update(path for path in _ETC if os.path.exists(path))
    project = [str(PROJECT_ROOT / package) for package in CHILD_PACKAGES]
    wanted = _python_paths() + project + _module_dirs(layout.extra_modules) + _program_paths()
    for path in wanted:
        chain, real = _symlink_chain(path)
        links.update({link: target for target, link in chain})
        binds.add(real)
    # Parents first; a folder already inside another bind needs no bind of its own.
    ordered = sorted(binds, key=lambda p: (p.count("/"), p))
    kept = [p for p in ordered if not any(p.startswith(q.rstrip("/") + "/") for q in ordered if q != p)]
    # Folders that hold a mount point, made world-readable (bubblewrap would make them with the
    # worker's umask, and the child's user could not walk through them).
    holders = sorted(
        {str(parent) for path in [*kept, *links] for parent in Path(path).parents if str(parent) != "/"},
        key=lambda p: (p.count("/"), p),
    )
    # The scratch tmpfs first: a project or virtualenv that lives under /tmp is bound on top of
    # it afterwards, instead of being hidden by it.
    arguments = ["--perms", "1777", "--size", str(layout.scratch_bytes), "--tmpfs", SCRATCH_DIR]
    for folder in holders:
        if not any(folder == q or folder.startswith(q.rstrip("/") + "/") for q in kept):
            arguments += ["--perms", "0755", "--dir", folder]
    for path in kept:
        arguments += ["--ro-bind", path, path]
    for link, target in sorted(links.items()):
        if not any(link == q or link.startswith(q.rstrip("/") + "/") for q in kept):
            arguments += ["--symlink", target, link]
    arguments += ["--proc", "/proc", "--dev", "/dev"]
    if input_dir is not None:
        arguments += ["--perms", "0755", "--dir", os.path.dirname(INPUT_DIR)]
        arguments += ["--ro-bind", input_dir, INPUT_DIR]
    return arguments


def command(
    layout: Layout, argv: list[str], env: dict[str, str], input_dir: str | None, info_fd: int | None = None
) -> list[str]:
    """The command line that starts ``argv`` walled in, with exactly ``env`` as its environment."""
    program = bwrap()
    assert program is not None
    namespaces = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    root = os.geteuid() == 0
    if not root:
        namespaces.append("--unshare-user")  # the rights to make the others, without privilege
    line = [program, *namespaces, "--die-with-parent", "--new-session", "--clearenv"]
    for key, value in sorted(env.items()):
        line += ["--setenv", key, value]
    line += ["--chdir", SCRATCH_DIR, *mount_arguments(layout, input_dir)]
    if info_fd is not None:
        line += ["--info-fd", str(info_fd)]
    line.append("--")
    if root:
        # Root made the namespaces; the child itself is a nobody with no capabilities left.
        setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
        line += [
            setpriv,
            f"--reuid={layout.uid}",
            f"--regid={layout.uid}",
            "--clear-groups",
            "--no-new-privs",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ]
    return line + argv


def probe(layout: Layout) -> Walls:
    """Whether a walled-in interpreter starts here (once per worker process, layout and bwrap)."""
    return _probe(layout, bwrap())


@functools.cache
def _probe(layout: Layout, program: str | None) -> Walls:
    if program is None:
        return Walls("none", "bubblewrap (bwrap) is not installed")
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        return Walls("none", "setpriv (util-linux) is not installed")
    script = "import sys, socket; assert len(socket.if_nameindex()) == 1; sys.exit(0)"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": SCRATCH_DIR}
    try:
        done = subprocess.run(
            command(layout, [sys.executable, "-c", script], env, None),
            capture_output=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Walls("none", f"bubblewrap did not start: {exc}")
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        return Walls("none", f"bubblewrap could not start the child: {detail[0][:300]}")
    return Walls("bubblewrap")


def stage_input(source: str, folder: Path) -> str:
    """A read-only copy of ``source`` in ``folder`` (bound into the child): the child's user may
    not read the stored file itself, and may not change it."""
    folder.mkdir(parents=True, mode=0o755)
    folder.parent.chmod(0o700)  # no other user of this machine walks in (only bubblewrap, as root)
    target = folder / Path(source).name
    shutil.copyfile(source, target)
    target.chmod(0o444)
    folder.chmod(0o555)
    return f"{INPUT_DIR}/{target.name}"


def stage_file(source: str, folder: Path) -> str:
    """A read-only copy of ``source`` in ``folder``, a new folder inside a fork server's input
    folder (bound into its walls): the path its calls see."""
    folder.mkdir(mode=0o755)
    target = folder / Path(source).name
    shutil.copyfile(source, target)
    target.chmod(0o444)
    folder.chmod(0o555)
    return f"{INPUT_DIR}/{folder.name}/{target.name}"


def interpreter_pid(info: bytes) -> int:
    """The interpreter's process id (outside its namespace) from bubblewrap's ``--info-fd``
    answer: it names the namespace's first process, whose one child is the interpreter."""
    init = int(json.loads(info or b"{}").get("child-pid", 0))
    if not init:
        return 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = _children_of(init)
        if found:
            return found[0]
        time.sleep(0.01)
    return init


def _children_of(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:  # a kernel without that file: the slow way
        pass
    except OSError:
        return []
    found = []
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            if (
                entry.isdigit()
                and int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1]) == pid
            ):
                found.append(int(entry))
    return found
