"""Each version keeps what the full-text ranking reads of it as a whole: the words of the title
its index entries' search texts open with (``search_title``) and its words with that title
counted once (``search_terms``), so a document's title counts once in its page's score, not once
per chunk (``documents.retrieval.backends.PAGE_WEIGHT``). Filled here for every version that has
index entries: the title is its document's title now, kept only where every entry's search text
opens with its words (a document renamed since it was indexed keeps none: its title then counts
once per chunk, as before, until it is indexed again); backwards, the columns go."""

from typing import Any

from django.db import migrations, models
from django.db.models import Q

from documents.engines.chunking import embedded_text
from documents.retrieval.index import record_version
from documents.retrieval.text import search_text


def fill(apps: Any, schema_editor: Any) -> None:
    IndexEntry = apps.get_model("documents", "IndexEntry")
    DocumentVersion = apps.get_model("documents", "DocumentVersion")
    indexed = IndexEntry.objects.using(schema_editor.connection.alias).values("version_id").distinct()
    versions = DocumentVersion.objects.filter(pk__in=indexed).values_list("pk", "document__title")
    for version_id, title in versions.iterator():
        words = search_text(embedded_text(title, ""))
        entries = IndexEntry.objects.filter(version_id=version_id)
        if words and entries.exclude(Q(search_text=words) | Q(search_text__startswith=words + " ")).exists():
            words = ""
        record_version(version_id, words)


class Migration(migrations.Migration):
    dependencies = [("documents", "0019_vector_codes_two_bits")]

    operations = [
        migrations.AddField(
            model_name="documentversion",
            name="search_title",
            field=models.TextField(blank=True, default=""),
        ),
        migrations.AddField(
            model_name="documentversion",
            name="search_terms",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
