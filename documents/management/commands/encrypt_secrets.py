"""``manage.py encrypt_secrets``: write every stored credential again with the current
``SECRET_KEY``, after a key rotation.

Rotating the key: set the new ``SECRET_KEY`` and put the old one in ``SECRET_KEY_FALLBACKS`` on
every process (credentials keep decrypting), run this once, then drop the fallback. Values no
configured key opens are counted, never printed.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from documents.services.webhooks import webhook_secrets_reencrypt
from documents.sources.services import source_credentials_reencrypt


class Command(BaseCommand):
    help = "Encrypt stored credentials (webhook secrets, sources' keys) again with the current SECRET_KEY."

    def handle(self, *args: Any, **options: Any) -> None:
        done, unreadable = webhook_secrets_reencrypt()
        self.stdout.write(
            f"webhook endpoints: {done} encrypted with the current key, {unreadable} unreadable"
        )
        sources_done, sources_unreadable = source_credentials_reencrypt()
        self.stdout.write(
            f"sources: {sources_done} encrypted with the current key, {sources_unreadable} unreadable"
        )
        unreadable += sources_unreadable
        if unreadable:
            raise CommandError(
                f"{unreadable} stored credentials open with none of SECRET_KEY and SECRET_KEY_FALLBACKS: "
                "add the key they were written with to SECRET_KEY_FALLBACKS and run this again"
            )
