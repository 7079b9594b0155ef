"""Folder sources: where a folder may be (under one of the operator's ``SOURCES_ALLOWED_ROOTS``,
symlinks resolved) and what it holds (files by their path relative to it, with a change marker
of modification time in nanoseconds and size).

Plain Python on the file system, no ORM. Refusals carry a stable code and user-safe words that
name no server path other than the one the user gave. :data:`KIND` is the kind for the sync
(``documents/sources/connectors.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.utils.translation import gettext_noop

from documents.causes import FOLDER_UNAVAILABLE
from documents.sources.connectors import MAX_KEY_LENGTH, Fetched, Listed, Refused, SourceKind, sha256_of

if TYPE_CHECKING:
    from documents.sources.models import Source


class FolderRefused(Refused):
    """A folder that cannot be a source (or be synced now), with a code and user-safe words."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message, "path")


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


def hash_item(folder: Path, key: str) -> str:
    """The SHA-256 of ``key``'s bytes, read in chunks."""
    with item_path(folder, key).open("rb") as handle:
        return sha256_of(handle)


class FolderConnector:
    """A folder source opened for one stage (``connectors.Connector``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def listing(self) -> Iterator[Listed | tuple[str, str]]:
        return list_folder(self.folder)

    @contextmanager
    def fetch(self, key: str) -> Iterator[Fetched]:
        path = item_path(self.folder, key)
        marker = marker_of(path.stat())
        with path.open("rb") as handle:
            yield Fetched(handle, marker, path.name)

    def digest(self, key: str) -> str:
        return hash_item(self.folder, key)

    def exists(self, key: str) -> bool:
        return (self.folder / key).exists()


def clean_config(config: Any) -> dict[str, Any]:
    """``{"path": <the path as given>}`` once it resolves under an allowed root."""
    path = config.get("path") if isinstance(config, dict) else None
    if not isinstance(path, str):
        raise FolderRefused("invalid_path", gettext_noop("Give the folder as an absolute path."))
    check_folder(path, settings.SOURCES_ALLOWED_ROOTS)
    return {"path": path.strip()}


def connect(source: Source, credentials: dict[str, str]) -> FolderConnector:
    return FolderConnector(check_folder(str(source.config.get("path", "")), settings.SOURCES_ALLOWED_ROOTS))


def check_now(source: Source) -> None:
    check_folder(str(source.config.get("path", "")), settings.SOURCES_ALLOWED_ROOTS)


KIND = SourceKind(
    kind="folder",
    clean_config=clean_config,
    connect=connect,
    unavailable=FOLDER_UNAVAILABLE,
    check_now=check_now,
)
