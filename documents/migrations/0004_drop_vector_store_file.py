"""The documents now carry their /v1 file id: it is required, one live file per id in a store,
found by tenant; the attachment table goes (a second list of a store's files is what let a
collection filled outside /v1 show no files there)."""

from django.db import migrations, models

import documents.models


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0003_document_file_ids"),
    ]

    operations = [
        migrations.AlterField(
            model_name="document",
            name="file_id",
            field=models.CharField(default=documents.models._file_id, editable=False, max_length=40),
        ),
        migrations.AddConstraint(
            model_name="document",
            constraint=models.UniqueConstraint(
                condition=models.Q(deleted_at__isnull=True),
                fields=("collection", "file_id"),
                name="document_file_once",
            ),
        ),
        migrations.AddIndex(
            model_name="document",
            index=models.Index(fields=["tenant", "file_id"], name="document_tenant_file"),
        ),
        migrations.DeleteModel(name="VectorStoreFile"),
    ]
