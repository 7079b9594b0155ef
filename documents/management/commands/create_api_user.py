"""``manage.py create_api_user USERNAME --tenant SLUG``: a user in a tenant, with an API token."""

from __future__ import annotations

import getpass
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
        parser.add_argument(
            "--password-prompt",
            action="store_true",
            help="Ask for the password for the pages (not echoed) instead of taking it as an argument.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["password_prompt"]:
            options["password"] = self.ask_password()
        try:
            token = user_create_in_tenant(
                username=options["username"], tenant_slug=options["tenant"], password=options["password"]
            )
        except ValidationError as refused:
            raise CommandError(" ".join(refused.messages)) from None
        self.stdout.write(token)

    def ask_password(self) -> str:
        first = getpass.getpass("Password for the pages: ")
        if not first or getpass.getpass("Password (again): ") != first:
            raise CommandError("the two passwords were empty or did not match; nothing was changed")
        return first
