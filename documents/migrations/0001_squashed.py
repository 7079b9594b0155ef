"""The documents app's tables in one migration (it replaces the history up to 0015, so a
database that applied those goes on as it is; see docs/upgrading.md).

Besides the models: the database cache table that throttles, the login lockout and the event
stream caps count in on the embedded default, and the search index the models do not describe
(``documents.retrieval.schema``: FTS5 with its triggers on SQLite; the ``tsvector`` column and
its GIN index on PostgreSQL, plus, where the server offers pgvector, the vector column and its
binary codes). Each embedder's HNSW index is made by the index seam when it first embeds.
"""

import django.db.models.deletion
import django.utils.timezone
import documents.models
import uuid
from django.conf import settings
from django.core.management import call_command
from django.db import migrations, models

from documents.retrieval.schema import drop_lexical_index, ensure_lexical_index


def create_cache_table(apps, schema_editor):  # type: ignore[no-untyped-def]
    call_command("createcachetable", database=schema_editor.connection.alias, verbosity=0)


def create_search_index(apps, schema_editor):  # type: ignore[no-untyped-def]
    ensure_lexical_index(schema_editor.connection)


def drop_search_index(apps, schema_editor):  # type: ignore[no-untyped-def]
    drop_lexical_index(schema_editor.connection)


class Migration(migrations.Migration):

    initial = True

    replaces = [
        ("documents", "0001_initial"),
        ("documents", "0002_document_attributes"),
        ("documents", "0002_retrieval_index"),
        ("documents", "0002_throttle_cache_table"),
        ("documents", "0003_lifecycle_delete"),
        ("documents", "0004_lifecycle_webhooks"),
        ("documents", "0005_lifecycle_batches"),
        ("documents", "0006_document_last_activity"),
        ("documents", "0006_merge_retrieval_and_lifecycle"),
        ("documents", "0006_merge_retrieval_lifecycle"),
        ("documents", "0006_tenant_embedders"),
        ("documents", "0007_collections"),
        ("documents", "0007_merge_last_activity"),
        ("documents", "0008_document_collection_required"),
        ("documents", "0009_version_processing"),
        ("documents", "0010_merge_collections"),
        ("documents", "0010_v1_file_objects"),
        ("documents", "0011_v1_vector_stores"),
        ("documents", "0012_merge_v1"),
        ("documents", "0013_merge_reindex"),
        ("documents", "0014_storage_retention_and_quota"),
        ("documents", "0015_version_entries"),
    ]

    dependencies = [
        ('jobs', '0001_squashed'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Collection',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('name', models.CharField(max_length=256)),
                ('description', models.TextField(blank=True, default='')),
                ('metadata', models.JSONField(blank=True, default=dict)),
                ('is_default', models.BooleanField(default=False)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                'ordering': ['-created_at'],
            },
        ),
        migrations.CreateModel(
            name='Document',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('title', models.CharField(max_length=300)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('latest_number', models.PositiveIntegerField(default=0)),
                ('deleted_at', models.DateTimeField(blank=True, null=True)),
                ('attributes', models.JSONField(blank=True, default=dict)),
                ('last_activity_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('collection', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='documents', to='documents.collection')),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-created_at'],
            },
        ),
        migrations.CreateModel(
            name='DocumentVersion',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('number', models.PositiveIntegerField()),
                ('file', models.FileField(max_length=300, upload_to='uploads/%Y/%m/')),
                ('original_name', models.CharField(max_length=255)),
                ('kind', models.CharField(help_text='Type sniffed from the content.', max_length=16)),
                ('content_type', models.CharField(max_length=100)),
                ('encoding', models.CharField(blank=True, default='', max_length=32)),
                ('size', models.PositiveBigIntegerField()),
                ('sha256', models.CharField(db_index=True, max_length=64)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('published_at', models.DateTimeField(blank=True, null=True)),
                ('superseded_at', models.DateTimeField(blank=True, null=True)),
                ('deleted_at', models.DateTimeField(blank=True, null=True)),
                ('bytes_freed_at', models.DateTimeField(blank=True, null=True)),
                ('processing', models.CharField(blank=True, default='', max_length=64)),
                ('entries', models.PositiveIntegerField(blank=True, null=True)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('document', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='documents.document')),
                ('job', models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='jobs.job')),
                ('reused_from', models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='documents.documentversion')),
            ],
            options={
                'ordering': ['document', '-number'],
            },
        ),
        migrations.AddField(
            model_name='document',
            name='latest_version',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='documents.documentversion'),
        ),
        migrations.AddField(
            model_name='document',
            name='published_version',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='documents.documentversion'),
        ),
        migrations.CreateModel(
            name='ChunkVector',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('ordinal', models.PositiveIntegerField()),
                ('batch', models.PositiveIntegerField()),
                ('embedder', models.CharField(max_length=100)),
                ('vector', models.BinaryField()),
                ('version', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='vectors', to='documents.documentversion')),
            ],
        ),
        migrations.CreateModel(
            name='Chunk',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('ordinal', models.PositiveIntegerField()),
                ('text', models.TextField()),
                ('page_start', models.PositiveIntegerField()),
                ('page_end', models.PositiveIntegerField()),
                ('heading_path', models.JSONField(blank=True, default=list)),
                ('version', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='chunks', to='documents.documentversion')),
            ],
            options={
                'ordering': ['version', 'ordinal'],
            },
        ),
        migrations.CreateModel(
            name='Page',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('number', models.PositiveIntegerField()),
                ('text', models.TextField(blank=True, default='')),
                ('blocks', models.JSONField(blank=True, default=list)),
                ('needs_ocr', models.BooleanField(default=False)),
                ('ocr_engine', models.CharField(blank=True, default='', max_length=32)),
                ('ocr_attempts', models.PositiveIntegerField(default=0)),
                ('version', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='pages', to='documents.documentversion')),
            ],
            options={
                'ordering': ['version', 'number'],
            },
        ),
        migrations.CreateModel(
            name='ProviderSlot',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('provider', models.CharField(max_length=100)),
                ('number', models.PositiveIntegerField()),
                ('holder', models.CharField(blank=True, default='', max_length=64)),
                ('expires_at', models.DateTimeField(blank=True, null=True)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('provider', 'number'), name='provider_slot_unique')],
            },
        ),
        migrations.CreateModel(
            name='Tenant',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('slug', models.SlugField(max_length=64, unique=True)),
                ('name', models.CharField(max_length=200)),
                ('max_running_jobs', models.PositiveIntegerField(default=4)),
                ('max_queued_jobs', models.PositiveIntegerField(default=200)),
                ('max_storage_bytes', models.PositiveBigIntegerField(blank=True, null=True)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('active_embedder', models.CharField(blank=True, default='', max_length=100)),
                ('target_embedder', models.CharField(blank=True, default='', max_length=100)),
                ('retired_embedder', models.CharField(blank=True, default='', max_length=100)),
                ('reindex_job', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='jobs.job')),
            ],
        ),
        migrations.CreateModel(
            name='Membership',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to=settings.AUTH_USER_MODEL)),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to='documents.tenant')),
            ],
        ),
        migrations.CreateModel(
            name='IndexEntry',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('ordinal', models.PositiveIntegerField()),
                ('batch', models.PositiveIntegerField()),
                ('embedder', models.CharField(max_length=100)),
                ('search_text', models.TextField(blank=True, default='')),
                ('chunk', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='index_entry', to='documents.chunk')),
                ('document', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='documents.document')),
                ('version', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='index_entries', to='documents.documentversion')),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='documents.tenant')),
            ],
        ),
        migrations.CreateModel(
            name='FileObject',
            fields=[
                ('id', models.CharField(default=documents.models._file_id, editable=False, max_length=40, primary_key=True, serialize=False)),
                ('filename', models.CharField(max_length=255)),
                ('purpose', models.CharField(max_length=32)),
                ('bytes', models.PositiveBigIntegerField()),
                ('sha256', models.CharField(max_length=64)),
                ('stored_name', models.CharField(max_length=500)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='file_objects', to='documents.tenant')),
            ],
        ),
        migrations.AddField(
            model_name='document',
            name='tenant',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='documents', to='documents.tenant'),
        ),
        migrations.CreateModel(
            name='Deletion',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('document_id', models.UUIDField()),
                ('version_number', models.PositiveIntegerField(blank=True, null=True)),
                ('version_ids', models.JSONField(blank=True, default=list)),
                ('requested_by_name', models.CharField(blank=True, default='', max_length=150)),
                ('via', models.CharField(default='api', max_length=16)),
                ('requested_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('cleaned_at', models.DateTimeField(blank=True, null=True)),
                ('rows_removed', models.PositiveIntegerField(default=0)),
                ('files_removed', models.PositiveIntegerField(default=0)),
                ('requested_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='documents.tenant')),
            ],
            options={
                'ordering': ['-requested_at'],
            },
        ),
        migrations.AddField(
            model_name='collection',
            name='tenant',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='collections', to='documents.tenant'),
        ),
        migrations.CreateModel(
            name='Batch',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('cancel_requested_at', models.DateTimeField(blank=True, null=True)),
                ('completed_at', models.DateTimeField(blank=True, null=True)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='batches', to='documents.tenant')),
            ],
            options={
                'ordering': ['-created_at'],
            },
        ),
        migrations.CreateModel(
            name='VectorStoreFileBatch',
            fields=[
                ('id', models.CharField(default=documents.models._batch_id, editable=False, max_length=40, primary_key=True, serialize=False)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('cancel_requested_at', models.DateTimeField(blank=True, null=True)),
                ('collection', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='file_batches', to='documents.collection')),
            ],
        ),
        migrations.CreateModel(
            name='VectorStoreFile',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('file_id', models.CharField(max_length=40)),
                ('chunking_strategy', models.JSONField(blank=True, default=dict)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('collection', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='vector_store_files', to='documents.collection')),
                ('document', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='vector_store_file', to='documents.document')),
                ('batch', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='files', to='documents.vectorstorefilebatch')),
            ],
        ),
        migrations.CreateModel(
            name='WebhookEndpoint',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('url', models.URLField(max_length=2000)),
                ('events', models.JSONField(default=list)),
                ('enabled', models.BooleanField(default=True)),
                ('secret', models.CharField(max_length=100)),
                ('description', models.CharField(blank=True, default='', max_length=200)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('disabled_at', models.DateTimeField(blank=True, null=True)),
                ('disabled_reason', models.CharField(blank=True, default='', max_length=300)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='webhook_endpoints', to='documents.tenant')),
            ],
            options={
                'ordering': ['tenant', 'created_at'],
            },
        ),
        migrations.CreateModel(
            name='WebhookMessage',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('event_type', models.CharField(max_length=40)),
                ('payload', models.JSONField()),
                ('state', models.CharField(choices=[('pending', 'Pending'), ('delivered', 'Delivered'), ('failed', 'Failed')], default='pending', max_length=12)),
                ('attempts', models.PositiveIntegerField(default=0)),
                ('next_attempt_at', models.DateTimeField(blank=True, null=True)),
                ('dispatched_at', models.DateTimeField(blank=True, null=True)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('delivered_at', models.DateTimeField(blank=True, null=True)),
                ('endpoint', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='messages', to='documents.webhookendpoint')),
            ],
            options={
                'ordering': ['-created_at'],
            },
        ),
        migrations.CreateModel(
            name='WebhookAttempt',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('at', models.DateTimeField(default=django.utils.timezone.now)),
                ('status_code', models.PositiveIntegerField(blank=True, null=True)),
                ('duration_ms', models.PositiveIntegerField(default=0)),
                ('error', models.CharField(blank=True, default='', max_length=300)),
                ('message', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='attempt_log', to='documents.webhookmessage')),
            ],
            options={
                'ordering': ['message', 'at'],
            },
        ),
        migrations.CreateModel(
            name='VectorStoreSettings',
            fields=[
                ('collection', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='vector_store', serialize=False, to='documents.collection')),
                ('expires_after_days', models.PositiveIntegerField(blank=True, null=True)),
                ('expires_at', models.DateTimeField(blank=True, null=True)),
                ('last_active_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('chunking_strategy', models.JSONField(blank=True, default=dict)),
            ],
            options={
                'indexes': [models.Index(condition=models.Q(('expires_at__isnull', False)), fields=['expires_at'], name='vector_store_expiring')],
            },
        ),
        migrations.CreateModel(
            name='BatchItem',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('position', models.PositiveIntegerField()),
                ('filename', models.CharField(max_length=255)),
                ('error_code', models.CharField(blank=True, default='', max_length=40)),
                ('error_message', models.CharField(blank=True, default='', max_length=300)),
                ('batch', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='items', to='documents.batch')),
                ('job', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='jobs.job')),
                ('document', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='documents.document')),
            ],
            options={
                'ordering': ['batch', 'position'],
                'constraints': [models.UniqueConstraint(fields=('batch', 'position'), name='batch_item_once')],
            },
        ),
        migrations.AddIndex(
            model_name='documentversion',
            index=models.Index(condition=models.Q(('deleted_at__isnull', False)), fields=['deleted_at'], name='version_deleted'),
        ),
        migrations.AddConstraint(
            model_name='documentversion',
            constraint=models.UniqueConstraint(fields=('document', 'number'), name='version_number_unique'),
        ),
        migrations.AddConstraint(
            model_name='chunkvector',
            constraint=models.UniqueConstraint(fields=('version', 'ordinal', 'embedder'), name='vector_once_per_embedder'),
        ),
        migrations.AddConstraint(
            model_name='chunk',
            constraint=models.UniqueConstraint(fields=('version', 'ordinal'), name='chunk_once'),
        ),
        migrations.AddConstraint(
            model_name='page',
            constraint=models.UniqueConstraint(fields=('version', 'number'), name='page_once'),
        ),
        migrations.AddConstraint(
            model_name='membership',
            constraint=models.UniqueConstraint(fields=('user',), name='membership_one_tenant_per_user'),
        ),
        migrations.AddIndex(
            model_name='indexentry',
            index=models.Index(fields=['tenant', 'embedder'], name='index_entry_tenant'),
        ),
        migrations.AddConstraint(
            model_name='indexentry',
            constraint=models.UniqueConstraint(fields=('version', 'ordinal'), name='index_entry_once'),
        ),
        migrations.AddIndex(
            model_name='fileobject',
            index=models.Index(fields=['tenant', 'created_at', 'id'], name='fileobject_tenant_keyset'),
        ),
        migrations.AddIndex(
            model_name='document',
            index=models.Index(fields=['tenant', '-created_at'], name='document_tenant_recent'),
        ),
        migrations.AddIndex(
            model_name='document',
            index=models.Index(fields=['tenant', '-last_activity_at'], name='document_tenant_activity'),
        ),
        migrations.AddIndex(
            model_name='document',
            index=models.Index(fields=['collection', '-created_at'], name='document_collection_recent'),
        ),
        migrations.AddIndex(
            model_name='document',
            index=models.Index(condition=models.Q(('deleted_at__isnull', False)), fields=['deleted_at'], name='document_deleted'),
        ),
        migrations.AddIndex(
            model_name='deletion',
            index=models.Index(condition=models.Q(('cleaned_at__isnull', True)), fields=['requested_at'], name='deletion_pending'),
        ),
        migrations.AddConstraint(
            model_name='deletion',
            constraint=models.UniqueConstraint(condition=models.Q(('version_number__isnull', True)), fields=('document_id',), name='deletion_once_per_document'),
        ),
        migrations.AddConstraint(
            model_name='deletion',
            constraint=models.UniqueConstraint(condition=models.Q(('version_number__isnull', False)), fields=('document_id', 'version_number'), name='deletion_once_per_version'),
        ),
        migrations.AddIndex(
            model_name='collection',
            index=models.Index(fields=['tenant', '-created_at'], name='collection_tenant_recent'),
        ),
        migrations.AddConstraint(
            model_name='collection',
            constraint=models.UniqueConstraint(condition=models.Q(('is_default', True)), fields=('tenant',), name='collection_one_default'),
        ),
        migrations.AddIndex(
            model_name='vectorstorefile',
            index=models.Index(fields=['collection', 'created_at', 'id'], name='vector_store_file_keyset'),
        ),
        migrations.AddConstraint(
            model_name='vectorstorefile',
            constraint=models.UniqueConstraint(fields=('collection', 'file_id'), name='vector_store_file_once'),
        ),
        migrations.AddIndex(
            model_name='webhookendpoint',
            index=models.Index(fields=['tenant', 'enabled'], name='webhook_endpoint_tenant'),
        ),
        migrations.AddIndex(
            model_name='webhookmessage',
            index=models.Index(condition=models.Q(('state', 'pending')), fields=['next_attempt_at'], name='webhook_message_due'),
        ),
        migrations.RunPython(create_cache_table, migrations.RunPython.noop),
        migrations.RunPython(create_search_index, drop_search_index),
    ]
