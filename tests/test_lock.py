"""requirements.lock belongs to pyproject.toml: CI fails when the dependencies changed and the
lock was not made again (`make lock`)."""

from __future__ import annotations

import re
import tomllib

import pytest

from tools import lockfile

PYPROJECT_TEXT = lockfile.PYPROJECT.read_text()
LOCK_TEXT = lockfile.LOCK.read_text()


def first_of(table: str) -> str:
    """The first requirement of ``dependencies`` or of the dev extra."""
    project = tomllib.loads(PYPROJECT_TEXT)["project"]
    requirements = project["dependencies"] if table == "runtime" else project["optional-dependencies"][table]
    requirement: str = requirements[0]
    return requirement


def edited(old: str, *new: str) -> str:
    """A copy of pyproject.toml whose requirement ``old`` is replaced by the requirements ``new``."""
    line = f'"{old}",'
    assert line in PYPROJECT_TEXT
    return PYPROJECT_TEXT.replace(line, "".join(f'"{text}", ' for text in new), 1)


def dev_dependency_added() -> str:
    return edited(first_of("dev"), first_of("dev"), "a-package-the-lock-lacks>=1")


def range_moved_past_the_pin() -> str:
    name = first_of("runtime").split(">")[0].split("=")[0]
    return edited(first_of("runtime"), f"{name}>=999")


def dependency_removed() -> str:
    return edited(first_of("runtime"))


def test_the_committed_lock_is_made_from_the_committed_pyproject():
    assert lockfile.stale_reason(PYPROJECT_TEXT, LOCK_TEXT) is None
    assert lockfile.unmet_requirements(PYPROJECT_TEXT, LOCK_TEXT) == []


def test_the_lock_pins_the_runtime_and_the_dev_extra_every_pin_with_a_hash():
    pinned, direct = lockfile.pins(LOCK_TEXT)
    assert {"django", "pytest", "pytest-xdist"} <= set(direct)
    assert "asgiref" in pinned and "asgiref" not in direct  # only a dependency's dependency
    entries = re.split(r"\n(?=[A-Za-z0-9])", LOCK_TEXT)[1:]
    assert len(entries) == len(pinned)
    assert [entry.split(" ")[0] for entry in entries if "--hash=sha256:" not in entry] == []


@pytest.mark.parametrize(
    ("change", "unmet"),
    [
        (dev_dependency_added, "is not in the lock"),
        (range_moved_past_the_pin, "is not met by the pinned"),
        (dependency_removed, "which no longer asks for it"),
    ],
    ids=["added", "range-moved", "removed"],
)
def test_a_lock_not_made_again_after_a_dependency_change_is_stale(change, unmet):
    changed = change()

    assert lockfile.stale_reason(changed, LOCK_TEXT) is not None
    assert any(unmet in problem for problem in lockfile.unmet_requirements(changed, LOCK_TEXT))


def test_a_lock_that_records_no_digest_is_stale():
    unstamped = LOCK_TEXT.split("\n", 1)[1]
    assert lockfile.recorded_digest(unstamped) is None

    assert "run `make lock`" in (lockfile.stale_reason(PYPROJECT_TEXT, unstamped) or "")


def test_comments_order_and_spacing_in_pyproject_leave_the_lock_fresh():
    dependencies = tomllib.loads(PYPROJECT_TEXT)["project"]["dependencies"]
    first, last = first_of("runtime"), dependencies[-1]
    moved = edited(first).replace(f'"{last}",', f'"{last}",\n    # moved to the end\n    " {first} ",', 1)
    assert tomllib.loads(moved)["project"]["dependencies"][-1] == f" {first} "

    assert lockfile.stale_reason(moved, LOCK_TEXT) is None


def test_stamping_the_lock_for_a_changed_pyproject_records_the_new_digest():
    changed = dev_dependency_added()

    restamped = lockfile.stamp(changed, LOCK_TEXT)

    assert lockfile.stale_reason(changed, restamped) is None
    assert lockfile.stale_reason(PYPROJECT_TEXT, restamped) is not None
    assert restamped.count(lockfile.DIGEST_PREFIX) == 1
