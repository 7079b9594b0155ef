"""A source's secrets (an S3 key, a web site's token): stored encrypted as one JSON object
(``documents/credentials.py``), read only to open the source for a sync, never shown again."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from django.utils.translation import gettext_noop

from documents.credentials import SecretUnreadable, decrypt, encrypt
from documents.sources.connectors import Refused

if TYPE_CHECKING:
    from documents.sources.models import Source


def seal(values: dict[str, str]) -> str:
    """What the source's ``credentials`` column stores for ``values`` (empty: none)."""
    return encrypt(json.dumps(values, sort_keys=True)) if values else ""


def credentials_of(source: Source) -> dict[str, str]:
    """The source's secrets; :class:`Refused` when no configured key decrypts them."""
    if not source.credentials:
        return {}
    try:
        values = json.loads(decrypt(source.credentials))
    except (SecretUnreadable, ValueError):
        raise Refused(
            "credentials_unreadable",
            gettext_noop("The source's credentials cannot be read. An admin must enter them again."),
            "credentials",
        ) from None
    return {str(key): str(value) for key, value in values.items()} if isinstance(values, dict) else {}
