"""Documents carry when a version was last added (the lists' default order); existing rows take
their latest version's upload time."""

import django.utils.timezone
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def fill(apps, schema_editor):
    Document = apps.get_model("documents", "Document")
    DocumentVersion = apps.get_model("documents", "DocumentVersion")
    latest = DocumentVersion.objects.filter(document=OuterRef("pk")).order_by("-created_at").values("created_at")[:1]
    Document.objects.update(last_activity_at=Subquery(latest))
    Document.objects.filter(last_activity_at__isnull=True).update(last_activity_at=models.F("created_at"))


class Migration(migrations.Migration):
    dependencies = [("documents", "0005_lifecycle_batches")]

    operations = [
        migrations.AddField(
            model_name="document",
            name="last_activity_at",
            field=models.DateTimeField(null=True),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="document",
            name="last_activity_at",
            field=models.DateTimeField(default=django.utils.timezone.now),
        ),
        migrations.AddIndex(
            model_name="document",
            index=models.Index(fields=["tenant", "-last_activity_at"], name="document_tenant_activity"),
        ),
    ]
