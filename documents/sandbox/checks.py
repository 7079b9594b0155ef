"""The sandbox's system check: ``manage.py check`` (and every command that runs the checks, such
as ``qcluster``), and the admin's health page, say when parsing runs without its walls."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, register
from django.core.checks import Warning as CheckWarning

from documents.sandbox.runner import sandbox_walls

HINT = (
    "Install bubblewrap (Debian: apt-get install bubblewrap) and run the workers as root or where "
    "user namespaces are allowed; see docs/deployment.md, 'The parsing sandbox'."
)


@register(Tags.security, "health")
def check_sandbox_walls(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    walls = sandbox_walls()
    if walls.isolated:
        return []
    message = (
        f"The parsing sandbox has no isolation here ({walls.reason}): a parser exploited by a "
        "hostile file could read the secret key, the database and every tenant's files."
    )
    if settings.DOCUMENTS_SANDBOX_REQUIRE_ISOLATION:
        hint = f"DOCUMENTS_SANDBOX_REQUIRE_ISOLATION is on. {HINT}"
        return [Error(message, hint=hint, id="documents.E010")]
    return [CheckWarning(message, hint=HINT, id="documents.W010")]
