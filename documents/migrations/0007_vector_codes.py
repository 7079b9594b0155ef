"""PostgreSQL without pgvector ranks meaning over every vector of a scope by binary codes: add the
vectors' sign bits (a generated column, filled for every existing row by this step) and their
index (``documents.retrieval.codes``). Nothing to do on SQLite."""

from typing import Any

from django.db import migrations

from documents.retrieval.codes import SIGN_BIT_SQL
from documents.retrieval.index import add_codes, drop_codes


def forward(apps: Any, schema_editor: Any) -> None:
    add_codes(schema_editor.connection, SIGN_BIT_SQL)  # one bit a dimension: 0019 makes it two


def backward(apps: Any, schema_editor: Any) -> None:
    drop_codes(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [("documents", "0006_verbose_names")]

    operations = [migrations.RunPython(forward, backward)]
