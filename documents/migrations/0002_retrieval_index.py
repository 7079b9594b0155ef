from typing import Any

from django.db import migrations, models

from documents.retrieval.schema import drop_lexical_index, ensure_lexical_index
from documents.retrieval.text import search_text


def fill_search_text(apps: Any, schema_editor: Any) -> None:
    # Entries indexed before this migration: their chunk's text, as the indexing stage now stores it.
    entry_model = apps.get_model("documents", "IndexEntry")
    entries = entry_model.objects.using(schema_editor.connection.alias).select_related("chunk")
    for entry in entries.iterator(chunk_size=500):
        entry.search_text = search_text(entry.chunk.text)
        entry.save(update_fields=["search_text"])


def create_index(apps: Any, schema_editor: Any) -> None:
    ensure_lexical_index(schema_editor.connection)


def drop_index(apps: Any, schema_editor: Any) -> None:
    drop_lexical_index(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0002_document_attributes"),
    ]

    operations = [
        # The vector stays in ChunkVector only (it was stored twice).
        migrations.RemoveField(model_name="indexentry", name="vector"),
        migrations.AddField(
            model_name="indexentry",
            name="search_text",
            field=models.TextField(blank=True, default=""),
        ),
        migrations.RunPython(fill_search_text, migrations.RunPython.noop),
        migrations.RunPython(create_index, drop_index),
    ]
