"""Folder sources: where a folder may be (under one of the operator's ``SOURCES_ALLOWED_ROOTS``,
symlinks resolved) and what it holds (files by their path relative to it, with a change marker
of modification time in nanoseconds and size).

Plain Python on the file system, no ORM. Refusals carry a stable code and user-safe words that
name no server path other than the one the user gave.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from django.utils.translation import gettext_noop

MAX_KEY_LENGTH = 1024
READ_CHUNK = 1024 * 1024


class FolderRefused(Exception):
    """A folder that cannot be a source (or be synced now), with a code and user-safe words."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def check_folder(path: str, roots: Sequence[str]) -> Path:
    """The folder ``path`` names, resolved, if it lies under one of ``roots`` (also resolved).

    A symlink anywhere on the way counts where it leads: a link inside an allowed root that
    points out of it is refused like the folder it points to."""
    if not roots:
        raise FolderRefused(
            "sources_disabled",
            gettext_noop(
                "Folder sources are not enabled on this server: an operator must allow a folder first."
            ),
        )
    text = str(path or "").strip()
    if not text or "\x00" in text or not os.path.isabs(text):
        raise FolderRefused("invalid_path", gettext_noop("Give the folder as an absolute path."))
    try:
        resolved = Path(text).resolve(strict=True)
    except (OSError, RuntimeError):  # missing, a loop of links, unreadable on the way
        raise FolderRefused("folder_not_found", gettext_noop("No folder exists at this path.")) from None
    if not any(resolved.is_relative_to(root) for root in _resolved(roots)):
        raise FolderRefused(
            "path_not_allowed",
            gettext_noop("This folder is not under a folder the operator allows for sources."),
        )
    if not resolved.is_dir():
        raise FolderRefused("not_a_folder", gettext_noop("This path is a file, not a folder."))
    return resolved


def _resolved(roots: Sequence[str]) -> list[Path]:
    found = []
    for root in roots:
        try:
            found.append(Path(root).resolve(strict=True))
        except (OSError, RuntimeError):
            continue  # an allowed root that does not exist allows nothing
    return found


@dataclass(frozen=True)
class Listed:
    key: str
    marker: str


def marker_of(stat: os.stat_result) -> str:
    return f"{stat.st_mtime_ns}:{stat.st_size}"


def list_folder(folder: Path) -> Iterator[Listed | tuple[str, str]]:
    """Every regular file under ``folder`` (hidden files and folders left out), sorted by key;
    a link leading out of ``folder`` is yielded as ``(key, "outside")`` instead: a failure."""
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            path = Path(dirpath) / name
            key = path.relative_to(folder).as_posix()
            if len(key) > MAX_KEY_LENGTH:
                yield (key[:MAX_KEY_LENGTH], "key_too_long")
                continue
            try:
                if path.is_symlink() and not path.resolve(strict=True).is_relative_to(folder):
                    yield (key, "outside")
                    continue
                stat = path.stat()
            except (OSError, RuntimeError):
                continue  # gone (or a dangling link) since the walk saw it: not there
            if path.is_file():
                yield Listed(key, marker_of(stat))


def item_path(folder: Path, key: str) -> Path:
    """The file of ``key``, refused (``FolderRefused``) if it resolves out of ``folder``."""
    path = (folder / key).resolve(strict=True)
    if not path.is_relative_to(folder):
        raise FolderRefused("outside", gettext_noop("The file links to a place outside the source's folder."))
    return path


def read_item(folder: Path, key: str) -> tuple[bytes, str, str]:
    """The bytes of ``key``, its marker taken before reading (a change during the read shows as a
    new marker on the next sync) and their SHA-256."""
    path = item_path(folder, key)
    marker = marker_of(path.stat())
    data = path.read_bytes()
    return data, marker, hashlib.sha256(data).hexdigest()


def hash_item(folder: Path, key: str) -> str:
    """The SHA-256 of ``key``'s bytes, read in chunks."""
    digest = hashlib.sha256()
    with item_path(folder, key).open("rb") as handle:
        while block := handle.read(READ_CHUNK):
            digest.update(block)
    return digest.hexdigest()
