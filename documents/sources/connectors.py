"""The seam between a sync and the place a source's items live (docs/sources.md, "Kinds").

A source kind is one :class:`SourceKind`: how its settings and credentials are checked before
they are stored, and how a stored source is opened as a :class:`Connector` for one sync stage.
``documents/sources/sync.py`` knows only this seam; each kind's module (``folder.py``, ...)
makes one ``KIND``, and ``documents/sources/registry.py`` lists them all.

Every refusal is a :class:`Refused` with a stable code and user-safe words: no server path, host,
key or secret other than what the user gave, so a refusal may be shown and stored as it is.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Protocol, runtime_checkable

from django.utils.translation import gettext_noop

if TYPE_CHECKING:
    from documents.causes import Cause
    from documents.sources.models import Source

READ_CHUNK = 1024 * 1024
MAX_KEY_LENGTH = 1024
# Why a listed item could not even be planned, in cause words (code, message).
LISTING_FAILURES = {
    "outside": ("link_outside", gettext_noop("The file links to a place outside the source's folder.")),
    "key_too_long": ("path_too_long", gettext_noop("The file's path inside the source is too long.")),
}


class Refused(Exception):
    """Settings that cannot be a source, or an item or source that cannot be read now, with a
    code and user-safe words (and the settings field it is about, if one)."""

    def __init__(self, code: str, message: str, field: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field


@dataclass(frozen=True)
class Listed:
    """One item as listed: its key (unique within the source) and its change marker."""

    key: str
    marker: str


@dataclass(frozen=True)
class Fetched:
    """One item's bytes, ready for the upload service: a readable binary stream, the marker the
    item had when it was read (taken before the bytes, so a change during the read shows as a new
    marker next sync) and the file name the document gets.

    ``access``: the access list the source's own metadata gives the item (principal keys, as the
    API takes them), or ``None`` when it gives none (a new document then inherits its
    collection's list, a changed one keeps its list)."""

    stream: IO[bytes]
    marker: str
    filename: str
    access: list[str] | None = None


class Connector(Protocol):
    """A source opened for one stage. Methods raise :class:`Refused` for an item that may not be
    read (the failure is recorded on the item) and ``OSError`` for one that is gone since it was
    listed (the next sync sees it)."""

    def listing(self) -> Iterator[Listed | tuple[str, str]]:
        """Every item, sorted by key; an item that cannot be planned is ``(key, failure)`` with a
        failure of :data:`LISTING_FAILURES`."""
        ...

    def fetch(self, key: str) -> AbstractContextManager[Fetched]:
        """The item's bytes, closed when the context ends."""
        ...

    def digest(self, key: str) -> str:
        """The SHA-256 of the item's current bytes."""
        ...

    def exists(self, key: str) -> bool:
        """Whether the item is (still, or again) in the source."""
        ...


@runtime_checkable
class Paced(Protocol):
    """A connector that waits between its requests (the web kind keeps a site's Crawl-delay).
    The sync gives it the stage's pause: a wait that is a safe point, so a cancel, a lost lease
    or a shutdown stops it at once, and that holds no transaction."""

    def use_pause(self, pause: Callable[[float], None]) -> None: ...


@dataclass(frozen=True)
class SourceKind:
    """One kind of source.

    - ``clean_config(config)``: the settings as stored (raises :class:`Refused` with a field);
    - ``clean_credentials(given, stored)``: the secrets as stored (encrypted by the caller), from
      what the user gave and what is stored (a kind without secrets returns ``{}``);
    - ``connect(source, credentials)``: the source opened for one stage (raises :class:`Refused`
      when the source cannot be reached or is no longer allowed: the sync fails with
      ``unavailable``);
    - ``check_now(source)``: the cheap check "sync now" makes before it starts a job (default: none).
    """

    kind: str
    clean_config: Callable[[Any], dict[str, Any]]
    connect: Callable[[Source, dict[str, str]], Connector]
    unavailable: Cause
    clean_credentials: Callable[[Any, dict[str, str]], dict[str, str]] = lambda given, _stored: (
        no_credentials(given)
    )
    check_now: Callable[[Source], None] = lambda source: None


def no_credentials(given: Any) -> dict[str, str]:
    """A kind without secrets: none may be given."""
    if given:
        raise Refused(
            "invalid_credentials", gettext_noop("Sources of this kind take no credentials."), "credentials"
        )
    return {}


def sha256_of(stream: IO[bytes]) -> str:
    """The SHA-256 of what is left in ``stream``, read in chunks."""
    digest = hashlib.sha256()
    while block := stream.read(READ_CHUNK):
        digest.update(block)
    return digest.hexdigest()
