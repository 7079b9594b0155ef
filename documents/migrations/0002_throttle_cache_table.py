"""The database cache table that throttles, the login lockout and SSE caps count in on the
embedded default (nothing is created when the ``throttle`` cache is Redis)."""

from django.core.management import call_command
from django.db import migrations


def create_cache_table(apps, schema_editor):  # type: ignore[no-untyped-def]
    call_command("createcachetable", database=schema_editor.connection.alias, verbosity=0)


class Migration(migrations.Migration):
    dependencies = [("documents", "0001_initial")]

    operations = [migrations.RunPython(create_cache_table, migrations.RunPython.noop, elidable=True)]
