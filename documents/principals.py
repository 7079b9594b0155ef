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
from collections.abc import Callable
from functools import cached_property

EVERYONE = "everyone"
# The permission that shows every document of a workspace, whatever its access list.
VIEW_ALL = "documents.view_all_documents"
_KEY = re.compile(r"^(user|group):([1-9][0-9]{0,17})$")


class Viewer:
    """One caller in one workspace. ``keys``, ``sees_all`` and ``is_admin`` are given, or read
    on first use by the loaders passed in (``documents.selectors.viewer_for``): a status poll,
    whose visibility check runs inside its one query, never reads them."""

    def __init__(
        self,
        *,
        tenant_id: int,
        user_id: int | None,
        keys: tuple[str, ...] | Callable[[], tuple[str, ...]],
        sees_all: bool | Callable[[], bool] = False,
        is_admin: bool | Callable[[], bool] = False,
        is_superuser: bool = False,
    ) -> None:
        self.tenant_id = tenant_id
        self.user_id = user_id
        self.is_superuser = is_superuser
        self._keys, self._sees_all, self._is_admin = keys, sees_all, is_admin

    @cached_property
    def keys(self) -> tuple[str, ...]:
        """The keys that name the caller: ``everyone``, their user, their groups here."""
        return self._keys() if callable(self._keys) else self._keys

    @cached_property
    def sees_all(self) -> bool:
        """``documents.view_all_documents``: every document of the workspace, whatever its list."""
        return self._sees_all() if callable(self._sees_all) else self._sees_all

    @cached_property
    def is_admin(self) -> bool:
        """A workspace admin (or a superuser): manages groups and every access list."""
        return self._is_admin() if callable(self._is_admin) else self._is_admin

    @property
    def loaded(self) -> bool:
        """Keys and permission known (given, or read already): nothing is left to read."""
        return not callable(self._keys) or ("keys" in self.__dict__ and "sees_all" in self.__dict__)

    @property
    def sees_all_already(self) -> bool:
        """Known to see every document without reading anything (a superuser, or said so)."""
        return self.is_superuser or self._sees_all is True

    def seeing_all(self) -> Viewer:
        """This caller, with every document of the workspace in sight."""
        return Viewer(
            tenant_id=self.tenant_id,
            user_id=self.user_id,
            keys=self._keys,
            sees_all=True,
            is_admin=self._is_admin,
            is_superuser=self.is_superuser,
        )

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
