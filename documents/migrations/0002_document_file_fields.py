"""Every document of a collection becomes a file of its vector store: the /v1 file id, chunking
and batch move from the attachment table onto the document (filled by the next migration)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0001_squashed"),
    ]

    operations = [
        migrations.AddField(
            model_name="document",
            name="file_id",
            field=models.CharField(editable=False, max_length=40, null=True),
        ),
        migrations.AddField(
            model_name="document",
            name="chunking_strategy",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="document",
            name="file_batch",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="documents",
                to="documents.vectorstorefilebatch",
            ),
        ),
    ]
