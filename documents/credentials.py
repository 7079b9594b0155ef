"""Credentials kept in the database (webhook signing secrets, later sources' keys), encrypted.

The key is derived from the deployment's ``SECRET_KEY`` (HKDF-SHA256, a purpose label of its
own, so it is not the key that signs cookies); values are Fernet tokens (AES-128-CBC with an
HMAC-SHA256, timestamped). After a key rotation (the old key moved to ``SECRET_KEY_FALLBACKS``)
values written with the old key still decrypt; :func:`reencrypt` (``manage.py encrypt_secrets``)
writes them again with the current key before the old one is dropped.

API::

    token = encrypt("whsec_...")   # what the column stores
    plain = decrypt(token)          # SecretUnreadable when no configured key opens it

Nothing here logs, and no error carries a value or a token: callers show a credential once, at
creation, and never again.
"""

from __future__ import annotations

import base64
from functools import lru_cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.signals import setting_changed

# Every token starts so; tells an encrypted value from a plaintext one (the migration, checks).
PREFIX = "enc1:"
_PURPOSE = b"documents.secrets: stored credentials v1"


class SecretUnreadable(Exception):
    """No configured key (``SECRET_KEY`` or a fallback) decrypts the value."""

    def __init__(self) -> None:
        super().__init__("a stored credential cannot be decrypted with SECRET_KEY or SECRET_KEY_FALLBACKS")


def derive_key(secret_key: str) -> bytes:
    """The Fernet key for ``secret_key`` (urlsafe base64 of 32 derived bytes)."""
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_PURPOSE).derive(secret_key.encode())
    return base64.urlsafe_b64encode(derived)


@lru_cache(maxsize=1)
def _fernet(secret_key: str, fallbacks: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(derive_key(key)) for key in (secret_key, *fallbacks)])


def _keys() -> MultiFernet:
    return _fernet(settings.SECRET_KEY, tuple(settings.SECRET_KEY_FALLBACKS))


def _forget_keys(*, setting: str, **kwargs: object) -> None:
    if setting in {"SECRET_KEY", "SECRET_KEY_FALLBACKS"}:
        _fernet.cache_clear()


setting_changed.connect(_forget_keys)


def is_encrypted(value: str) -> bool:
    return value.startswith(PREFIX)


def encrypt(plaintext: str) -> str:
    """``plaintext`` encrypted with the current key, as stored text."""
    return PREFIX + _keys().encrypt(plaintext.encode()).decode("ascii")


def decrypt(token: str) -> str:
    """The plaintext of a value :func:`encrypt` made with the current key or a fallback."""
    if not is_encrypted(token):
        raise SecretUnreadable
    try:
        return _keys().decrypt(token[len(PREFIX) :].encode("ascii")).decode()
    except (InvalidToken, UnicodeError, ValueError):
        raise SecretUnreadable from None


def reencrypt(token: str) -> str:
    """The same plaintext encrypted with the current key (after a rotation)."""
    if not is_encrypted(token):
        raise SecretUnreadable
    try:
        return PREFIX + _keys().rotate(token[len(PREFIX) :].encode("ascii")).decode("ascii")
    except (InvalidToken, ValueError):
        raise SecretUnreadable from None


def reencrypt_rows(rows: Any, column: str) -> tuple[int, int]:
    """Encrypt ``column`` of every row of the queryset ``rows`` again with the current key (after
    a rotation); ``(done, unreadable)``. One row at a time, each a compare-and-set on the value
    read, so a parallel change wins."""
    done = unreadable = 0
    for pk, token in rows.exclude(**{column: ""}).values_list("pk", column).iterator():
        try:
            fresh = reencrypt(token)
        except SecretUnreadable:
            unreadable += 1
            continue
        done += rows.model.objects.filter(pk=pk, **{column: token}).update(**{column: fresh})
    return done, unreadable
