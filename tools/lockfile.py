"""Keeps ``requirements.lock`` honest about ``pyproject.toml``.

``make lock`` resolves pyproject's ranges (the runtime dependencies and the ``dev`` extra) into
``requirements.lock``, every file pinned by hash, then records here (:func:`stamp`) a digest of
those tables on the lock's first line. Two checks read it back:

- :func:`stale_reason`: the digest, recomputed from pyproject. Any change to the dependency
  tables (a package added, removed, a range moved, ``requires-python``) makes it differ until the
  lock is regenerated; comments and order do not count. It needs only the standard library, so
  ``make setup`` runs it before installing anything.
- :func:`unmet_requirements`: the pins themselves. Every requirement of pyproject (markers taken
  for the lock's target, CPython 3.11 on linux x86_64) is met by the pinned version, and every
  package the lock lists as asked for by pyproject still is. It catches a lock edited by hand or
  resolved from another pyproject, which the digest alone would not.

Usage: ``python -m tools.lockfile stamp|check [--pyproject PATH] [--lock PATH]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
LOCK = ROOT / "requirements.lock"
LOCKED_EXTRAS = ("dev",)
DIGEST_PREFIX = "# pyproject-dependencies-sha256: "
# The one environment the lock is resolved for (the Makefile's `uv pip compile` target).
TARGET = {
    "python_version": "3.11",
    "python_full_version": "3.11.0",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
}
PROJECT_ANNOTATION = "(pyproject.toml)"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)")


def _locked_tables(pyproject_text: str) -> tuple[str, dict[str, list[str]]]:
    """``requires-python`` and the requirement lists the lock is made from, spacing normalised."""
    project = tomllib.loads(pyproject_text)["project"]
    extras = project.get("optional-dependencies", {})
    tables = {
        "dependencies": project.get("dependencies", []),
        **{f"extra:{name}": extras.get(name, []) for name in LOCKED_EXTRAS},
    }
    normalised = {key: sorted(" ".join(text.split()) for text in texts) for key, texts in tables.items()}
    return str(project.get("requires-python", "")), normalised


def dependency_digest(pyproject_text: str) -> str:
    """The digest of what the lock is resolved from: insensitive to comments, spacing and order."""
    requires_python, tables = _locked_tables(pyproject_text)
    canonical = json.dumps({"requires-python": requires_python, **tables}, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def recorded_digest(lock_text: str) -> str | None:
    for line in lock_text.splitlines():
        if line.startswith(DIGEST_PREFIX):
            return line[len(DIGEST_PREFIX) :].strip()
    return None


def stamp(pyproject_text: str, lock_text: str) -> str:
    """The lock with the digest of ``pyproject_text`` on its first line (replacing an older one)."""
    body = [line for line in lock_text.splitlines() if not line.startswith(DIGEST_PREFIX)]
    return "\n".join([DIGEST_PREFIX + dependency_digest(pyproject_text), *body]) + "\n"


def stale_reason(pyproject_text: str, lock_text: str) -> str | None:
    """Why the lock does not belong to this pyproject, or None when it does."""
    recorded = recorded_digest(lock_text)
    if recorded is None:
        return "the lock records no digest of pyproject.toml's dependencies: run `make lock`"
    if recorded != dependency_digest(pyproject_text):
        return "pyproject.toml's dependencies changed since the lock was made: run `make lock`"
    return None


def pins(lock_text: str) -> tuple[dict[str, str], set[str]]:
    """The lock's pins (canonical name -> version) and the names it says pyproject asks for."""
    from packaging.utils import canonicalize_name

    pinned: dict[str, str] = {}
    direct: set[str] = set()
    current = ""
    for line in lock_text.splitlines():
        match = _PIN.match(line)
        if match:
            current = canonicalize_name(match.group(1))
            pinned[current] = match.group(2)
        elif current and line.lstrip().startswith("#") and PROJECT_ANNOTATION in line:
            direct.add(current)
    return pinned, direct


def unmet_requirements(pyproject_text: str, lock_text: str) -> list[str]:
    """Each way the lock's pins disagree with pyproject's requirements (empty when they agree)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    _, tables = _locked_tables(pyproject_text)
    requirements = [Requirement(text) for texts in tables.values() for text in texts]
    pinned, direct = pins(lock_text)
    problems = []
    asked = set()
    for requirement in requirements:
        if requirement.marker is not None and not requirement.marker.evaluate({**TARGET, "extra": ""}):
            continue
        name = canonicalize_name(requirement.name)
        asked.add(name)
        version = pinned.get(name)
        if version is None:
            problems.append(f"{requirement} is not in the lock")
        elif not requirement.specifier.contains(version, prereleases=True):
            problems.append(f"{requirement} is not met by the pinned {name}=={version}")
    problems += [
        f"{name} is pinned as asked for by pyproject.toml, which no longer asks for it"
        for name in sorted(direct - asked)
    ]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.lockfile", description="Stamp requirements.lock, or check it is not stale."
    )
    parser.add_argument("command", choices=["stamp", "check"])
    parser.add_argument("--pyproject", type=Path, default=PYPROJECT)
    parser.add_argument("--lock", type=Path, default=LOCK)
    args = parser.parse_args(argv)
    pyproject_text = args.pyproject.read_text()
    if args.command == "stamp":
        args.lock.write_text(stamp(pyproject_text, args.lock.read_text()))
        return 0
    reason = stale_reason(pyproject_text, args.lock.read_text())
    if reason:
        print(f"{args.lock.name}: {reason}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
