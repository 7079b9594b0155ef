"""``manage.py demo_setup``: a demo workspace and user for a first run on a new machine."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from documents.services.accounts import user_create_in_tenant


class Command(BaseCommand):
    help = "Create the demo tenant with a user (password 'demo') and print how to use it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="demo")
        parser.add_argument("--password", default="demo")
        parser.add_argument("--tenant", default="demo")

    def handle(self, *args: Any, **options: Any) -> None:
        token = user_create_in_tenant(
            username=options["username"], tenant_slug=options["tenant"], password=options["password"]
        )
        self.stdout.write(
            f"demo workspace '{options['tenant']}': log in as {options['username']} / {options['password']}; "
            f"API token: {token}"
        )
