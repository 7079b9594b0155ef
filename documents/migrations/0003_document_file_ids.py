"""Fill the documents' /v1 file fields: an attached document keeps its file object's id, chunking
and batch; every other document (uploaded through /api, the pages, the CLI or a source) gets
``file-`` and its own id, so it is listed, counted and found in its store like the others."""

from typing import Any

from django.db import migrations

BATCH = 1000


def forward(apps: Any, schema_editor: Any) -> None:
    Document = apps.get_model("documents", "Document")
    VectorStoreFile = apps.get_model("documents", "VectorStoreFile")
    for link in VectorStoreFile.objects.all().iterator(chunk_size=BATCH):
        Document.objects.filter(pk=link.document_id).update(
            file_id=link.file_id, chunking_strategy=link.chunking_strategy or {}, file_batch=link.batch_id
        )
    while True:
        rest = list(Document.objects.filter(file_id__isnull=True).only("pk")[:BATCH])
        if not rest:
            break
        for document in rest:
            document.file_id = f"file-{document.pk.hex}"
        Document.objects.bulk_update(rest, ["file_id"])


def backward(apps: Any, schema_editor: Any) -> None:
    Document = apps.get_model("documents", "Document")
    VectorStoreFile = apps.get_model("documents", "VectorStoreFile")
    for document in Document.objects.exclude(file_id__isnull=True).iterator(chunk_size=BATCH):
        VectorStoreFile.objects.get_or_create(
            document_id=document.pk,
            defaults={
                "collection_id": document.collection_id,
                "file_id": document.file_id,
                "batch_id": document.file_batch_id,
                "chunking_strategy": document.chunking_strategy or {},
                "created_at": document.created_at,
            },
        )


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0002_document_file_fields"),
    ]

    operations = [migrations.RunPython(forward, backward)]
