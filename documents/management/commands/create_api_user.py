"""``manage.py create_api_user USERNAME --tenant SLUG``: a user in a tenant, with an API token."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from documents.services.accounts import user_create_in_tenant


class Command(BaseCommand):
    help = "Create (or reuse) a user in a tenant (created if needed) and print an API token."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--tenant", required=True, help="Tenant slug.")
        parser.add_argument("--password", default=None, help="Also set a password for the pages.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            token = user_create_in_tenant(
                username=options["username"], tenant_slug=options["tenant"], password=options["password"]
            )
        except ValidationError as refused:
            raise CommandError(" ".join(refused.messages)) from None
        self.stdout.write(token)
