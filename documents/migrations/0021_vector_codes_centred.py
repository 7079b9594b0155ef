"""PostgreSQL without pgvector: the codes of a model whose vectors all share one large direction
(``documents.retrieval.centres``: multilingual-e5) are taken of the vector minus that direction,
which keeps far more of the true nearest in the shortlist the codes give. The generated column
is dropped and added again with the new expression, which rewrites the vector table once and
computes every existing row's code; backwards, the plain two-bit codes are restored the same way.
The pgvector codes follow on their own (``codes.ensure_schema``, after every ``migrate``).
Nothing to do on SQLite."""

from typing import Any

from django.db import migrations

from documents.retrieval.codes import SIGN_BITS_SQL, sign_bits_sql
from documents.retrieval.index import add_codes, drop_codes


def forward(apps: Any, schema_editor: Any) -> None:
    drop_codes(schema_editor.connection)
    add_codes(schema_editor.connection, sign_bits_sql())


def backward(apps: Any, schema_editor: Any) -> None:
    drop_codes(schema_editor.connection)
    add_codes(schema_editor.connection, SIGN_BITS_SQL)


class Migration(migrations.Migration):
    dependencies = [("documents", "0020_version_search_title")]

    operations = [migrations.RunPython(forward, backward)]
