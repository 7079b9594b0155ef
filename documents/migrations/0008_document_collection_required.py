# Its own migration: on PostgreSQL the data move above leaves deferred trigger events that an
# ALTER TABLE in the same transaction would refuse.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0007_collections"),
    ]

    operations = [
        migrations.AlterField(
            model_name="document",
            name="collection",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT, related_name="documents", to="documents.collection"
            ),
        ),
    ]
