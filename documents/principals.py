"""Principal keys and the caller they describe (plain Python, no ORM).

A key names who an access list allows: ``everyone`` (each member of the workspace), ``user:<id>``
or ``group:<id>``. A :class:`Viewer` is one caller in one workspace: the keys that name them
(``everyone``, their user, their groups there) and whether they see every document regardless
(the permission ``documents.view_all_documents``). Search puts ``Viewer.keys`` into the index
queries (``documents.retrieval.backends.Scope.principals``); the selectors put them into every
list and detail read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

EVERYONE = "everyone"
_KEY = re.compile(r"^(user|group):([1-9][0-9]{0,17})$")


@dataclass(frozen=True)
class Viewer:
    tenant_id: int
    user_id: int | None
    keys: tuple[str, ...]
    # documents.view_all_documents: every document of the workspace, whatever its list.
    sees_all: bool = False
    # A workspace admin (or a superuser): manages groups and every access list.
    is_admin: bool = False

    @property
    def principals(self) -> tuple[str, ...] | None:
        """The keys search must match, or None when nothing limits this caller."""
        return None if self.sees_all else self.keys


def user_key(user_id: int) -> str:
    return f"user:{user_id}"


def group_key(group_id: int) -> str:
    return f"group:{group_id}"


def parse_key(value: object) -> tuple[str, int | None] | None:
    """``("everyone", None)``, ``("user", id)``, ``("group", id)``, or None for anything else."""
    if value == EVERYONE:
        return EVERYONE, None
    if not isinstance(value, str):
        return None
    found = _KEY.match(value)
    if found is None:
        return None
    return found.group(1), int(found.group(2))
