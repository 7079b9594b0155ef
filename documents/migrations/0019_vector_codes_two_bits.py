"""PostgreSQL without pgvector: the vectors' codes become two bits a dimension, (x > 0, x < 0),
so a zero component no longer reads as a positive one (the hashing embedder's sparse vectors
kept too few of their nearest otherwise). The generated column is dropped and added again with
the new expression, which rewrites the vector table once and computes every existing row's code;
backwards, the one-bit codes are restored the same way (``documents.retrieval.codes``). Nothing
to do on SQLite."""

from typing import Any

from django.db import migrations

from documents.retrieval.codes import SIGN_BIT_SQL, SIGN_BITS_SQL
from documents.retrieval.index import add_codes, drop_codes


def forward(apps: Any, schema_editor: Any) -> None:
    drop_codes(schema_editor.connection)
    add_codes(schema_editor.connection, SIGN_BITS_SQL)


def backward(apps: Any, schema_editor: Any) -> None:
    drop_codes(schema_editor.connection)
    add_codes(schema_editor.connection, SIGN_BIT_SQL)


class Migration(migrations.Migration):
    dependencies = [("documents", "0018_source_schedule_cron")]

    operations = [migrations.RunPython(forward, backward)]
