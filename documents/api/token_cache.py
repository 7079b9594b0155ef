"""A short-lived, per-process memory of good tokens, so a polling client's requests skip the
authentication query.

Clients poll the status endpoint about once a second with the same token; on a busy machine each
database round trip of a request waits for the database process to be scheduled, and the token
query was one of the two (bench/README.md, "Speed where users feel it"). A token found good is remembered for
``API_TOKEN_CACHE_SECONDS`` (default 5; 0 turns the memory off) in this process only.

The bound, as docs/limits.md documents it: a revoked token, a deactivated user or a changed
membership takes effect **at once** in the process that made the change (every change through the
ORM's save or delete clears the memory, below) and within ``API_TOKEN_CACHE_SECONDS`` in every
other web process (and for changes made with ``QuerySet.update`` or outside Django). Unknown
tokens are never remembered (so guessing fills nothing and is still counted by the failure
throttle), and the memory holds at most ``MAX_ENTRIES`` tokens.
"""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models.signals import post_delete, post_save
from rest_framework.authtoken.models import Token

from documents.models import Membership, Tenant

MAX_ENTRIES = 10_000

_entries: dict[str, tuple[float, Any, Token, Tenant | None]] = {}
_lock = threading.Lock()
# The clock, a module attribute so tests can move time instead of waiting for it.
clock = time.monotonic


def ttl() -> float:
    return settings.API_TOKEN_CACHE_SECONDS


def recall(key: str) -> tuple[Any, Token, Tenant | None] | None:
    """The remembered ``(user, token, tenant)`` for ``key``, fresh copies, or None."""
    entry = _entries.get(key)
    if entry is None:
        return None
    expires, user, token, tenant = entry
    if clock() >= expires:
        _entries.pop(key, None)
        return None
    # Copies: a request may set attributes on its user (the tenant it found), never on the memory.
    user = copy.copy(user)
    token = copy.copy(token)
    token.user = user
    return user, token, copy.copy(tenant) if tenant is not None else None


def remember(key: str, user: Any, token: Token, tenant: Tenant | None) -> None:
    seconds = ttl()
    if seconds <= 0:
        return
    with _lock:
        if len(_entries) >= MAX_ENTRIES:
            _entries.clear()  # rare (as many live tokens in one process): start again, never grow
        _entries[key] = (clock() + seconds, copy.copy(user), copy.copy(token), copy.copy(tenant))


def forget_all(**_: Any) -> None:
    """Drop every remembered token (any token, user, membership or tenant saved or deleted)."""
    with _lock:
        _entries.clear()


for _model in (Token, get_user_model(), Membership, Tenant):
    post_save.connect(forget_all, sender=_model, dispatch_uid=f"token_cache_save_{_model._meta.label}")
    post_delete.connect(forget_all, sender=_model, dispatch_uid=f"token_cache_delete_{_model._meta.label}")
