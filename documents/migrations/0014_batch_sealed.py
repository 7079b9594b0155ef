from django.db import migrations, models
from django.db.models import F


def seal_existing(apps, schema_editor):
    """Every batch made before this field had all its files recorded in its own request."""
    apps.get_model("documents", "Batch").objects.filter(sealed_at=None).update(sealed_at=F("created_at"))


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0013_tenant_full_text"),
    ]

    operations = [
        migrations.AddField(
            model_name="batch",
            name="sealed_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(seal_existing, migrations.RunPython.noop),
    ]
