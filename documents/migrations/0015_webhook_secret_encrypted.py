"""Webhook signing secrets stored encrypted (documents/credentials.py): the column is renamed so
no code reads ciphertext as a secret, and every existing row is encrypted in place. Reversible:
backwards decrypts them (with SECRET_KEY or a fallback) into the plaintext column again."""

from typing import Any

from django.db import migrations, models

from documents import credentials


def encrypt_rows(apps: Any, schema_editor: Any) -> None:
    Endpoint = apps.get_model("documents", "WebhookEndpoint")
    for pk, value in Endpoint.objects.values_list("pk", "secret_encrypted").iterator():
        if not credentials.is_encrypted(value):
            Endpoint.objects.filter(pk=pk).update(secret_encrypted=credentials.encrypt(value))


def decrypt_rows(apps: Any, schema_editor: Any) -> None:
    Endpoint = apps.get_model("documents", "WebhookEndpoint")
    for pk, value in Endpoint.objects.values_list("pk", "secret_encrypted").iterator():
        if credentials.is_encrypted(value):
            Endpoint.objects.filter(pk=pk).update(secret_encrypted=credentials.decrypt(value))


class Migration(migrations.Migration):
    dependencies = [("documents", "0014_batch_sealed")]

    operations = [
        migrations.RenameField("webhookendpoint", "secret", "secret_encrypted"),
        migrations.AlterField(
            model_name="webhookendpoint",
            name="secret_encrypted",
            field=models.TextField(editable=False),
        ),
        migrations.RunPython(encrypt_rows, decrypt_rows, elidable=False),
    ]
