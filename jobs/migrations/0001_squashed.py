"""The engine's tables in one migration (it replaces the history up to 0011, so a database that
applied those goes on as it is; see docs/upgrading.md).

Besides the models: the django-q2 schedule that runs the reaper once a minute (the run command
also keeps a faster reaper loop beside the cluster), the PostgreSQL trigger that notifies every
new job event at commit (``pg_notify('job_events', '<job id>:<event id>')``, never for a
rolled-back insert), and partial indexes that bound the health figures by what is live or
recent.
"""

import django.db.models.deletion
import django.utils.timezone
import django_fsm
import uuid
from django.db import migrations, models


def create_schedule(apps, schema_editor):  # type: ignore[no-untyped-def]
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.get_or_create(
        name="jobs-reaper",
        defaults={"func": "jobs.tasks.reap_jobs", "schedule_type": "I", "minutes": 1, "repeats": -1},
    )


def remove_schedule(apps, schema_editor):  # type: ignore[no-untyped-def]
    apps.get_model("django_q", "Schedule").objects.filter(name="jobs-reaper").delete()


NOTIFY = """
CREATE OR REPLACE FUNCTION jobs_jobevent_notify() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('job_events', NEW.job_id::text || ':' || NEW.id::text);
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER jobs_jobevent_notify AFTER INSERT ON jobs_jobevent
    FOR EACH ROW EXECUTE FUNCTION jobs_jobevent_notify();
"""

UNNOTIFY = """
DROP TRIGGER IF EXISTS jobs_jobevent_notify ON jobs_jobevent;
DROP FUNCTION IF EXISTS jobs_jobevent_notify();
"""


def _on_postgresql(sql):  # type: ignore[no-untyped-def]
    def run(apps, schema_editor):  # type: ignore[no-untyped-def]
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return run


ACTIVE = "('uploaded', 'queued', 'running', 'cancel_requested', 'stalled')"
HEALTH_INDEXES = {
    # Jobs by kind, status and stage, and the tenants' loads: only the jobs not yet finished.
    "job_health_active": f"ON jobs_job (status, kind, stage, tenant) WHERE status IN {ACTIVE}",
    # Failed jobs by cause in the last day: a range of the failed jobs' finish times.
    "job_health_failed": "ON jobs_job (finished_at, error_code) WHERE status = 'failed'",
    # Live workers: the jobs whose heartbeat is within the last lease period.
    "job_health_heartbeat": "ON jobs_job (heartbeat_at) WHERE heartbeat_at IS NOT NULL",
}


class Migration(migrations.Migration):

    initial = True

    replaces = [
        ("jobs", "0001_initial"),
        ("jobs", "0002_reaper_schedule"),
        ("jobs", "0003_operator_console"),
        ("jobs", "0004_event_and_run_time_indexes"),
        ("jobs", "0005_reaper_and_audit_indexes"),
        ("jobs", "0006_audit_indexes_and_watermark"),
        ("jobs", "0007_event_notify_trigger"),
        ("jobs", "0008_timing_buckets"),
        ("jobs", "0008_worker_beat"),
        ("jobs", "0009_health_indexes"),
        ("jobs", "0010_merge_worker_beat_and_health"),
        ("jobs", "0011_stagerun_outcome_handed_back"),
    ]

    dependencies = [
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [
        migrations.CreateModel(
            name='AuditMark',
            fields=[
                ('name', models.CharField(max_length=64, primary_key=True, serialize=False)),
                ('value', models.BigIntegerField(default=0)),
                ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
        ),
        migrations.CreateModel(
            name='WorkerBeat',
            fields=[
                ('name', models.CharField(max_length=200, primary_key=True, serialize=False)),
                ('host', models.CharField(max_length=200)),
                ('pid', models.PositiveIntegerField()),
                ('started_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('beat_at', models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
            ],
        ),
        migrations.CreateModel(
            name='Job',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('kind', models.CharField(max_length=64)),
                ('tenant', models.CharField(db_index=True, help_text='Opaque tenant key.', max_length=64)),
                ('subject_id', models.CharField(max_length=64)),
                ('subject_version', models.PositiveIntegerField(default=1)),
                ('payload', models.JSONField(blank=True, default=dict, help_text="The job's input.")),
                ('status', django_fsm.FSMField(choices=[('uploaded', 'Uploaded'), ('queued', 'Queued'), ('running', 'Running'), ('cancel_requested', 'Cancel Requested'), ('stalled', 'Stalled'), ('ready', 'Ready'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], default='uploaded', max_length=50, protected=True)),
                ('stage', models.CharField(max_length=32)),
                ('version', models.PositiveBigIntegerField(default=1, help_text='Bumped by every status change.')),
                ('attempt', models.PositiveIntegerField(default=0, help_text='Attempts of the current stage.')),
                ('attempts_total', models.PositiveIntegerField(default=0)),
                ('skipped_stages', models.JSONField(blank=True, default=list)),
                ('hints', models.JSONField(blank=True, default=dict, help_text='Retry adjustments for the handler.')),
                ('checkpoint', models.JSONField(blank=True, default=dict)),
                ('cleanup_from', models.CharField(blank=True, default='', help_text='Outputs from this stage on await removal.', max_length=32)),
                ('worker_token', models.CharField(blank=True, max_length=64, null=True)),
                ('worker_name', models.CharField(blank=True, default='', max_length=128)),
                ('heartbeat_at', models.DateTimeField(blank=True, null=True)),
                ('lease_expires_at', models.DateTimeField(blank=True, null=True)),
                ('lost_worker', models.CharField(blank=True, default='', max_length=128)),
                ('not_before', models.DateTimeField(blank=True, null=True)),
                ('dispatched_at', models.DateTimeField(blank=True, null=True)),
                ('progress', models.FloatField(default=0.0)),
                ('processed', models.PositiveIntegerField(blank=True, null=True)),
                ('total', models.PositiveIntegerField(blank=True, null=True)),
                ('progress_event_at', models.DateTimeField(blank=True, null=True)),
                ('error_code', models.CharField(blank=True, default='', max_length=64)),
                ('error_message', models.CharField(blank=True, default='', max_length=500)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('queued_at', models.DateTimeField(blank=True, null=True)),
                ('started_at', models.DateTimeField(blank=True, null=True)),
                ('cancel_requested_at', models.DateTimeField(blank=True, null=True)),
                ('stalled_at', models.DateTimeField(blank=True, null=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                'ordering': ['-created_at'],
                'permissions': [('takeover_job', 'Can take over stalled jobs'), ('force_retry_job', 'Can force a retry or a restart of a failed job')],
                'indexes': [models.Index(condition=models.Q(('status', 'queued')), fields=['not_before', 'queued_at'], name='job_claimable'), models.Index(condition=models.Q(('status__in', ('running', 'cancel_requested'))), fields=['lease_expires_at'], name='job_lease_expiry'), models.Index(condition=models.Q(('status', 'stalled')), fields=['stalled_at'], name='job_stalled'), models.Index(condition=models.Q(('dispatched_at__isnull', True), ('status', 'queued')), fields=['not_before', 'queued_at'], name='job_never_dispatched'), models.Index(condition=models.Q(('status', 'queued')), fields=['dispatched_at'], name='job_dispatched'), models.Index(condition=models.Q(('cleanup_from', ''), _negated=True), fields=['finished_at'], name='job_cleanup_pending'), models.Index(condition=models.Q(models.Q(('status__in', ('running', 'cancel_requested')), models.Q(('worker_token__isnull', True), ('heartbeat_at__isnull', True), _connector='OR')), models.Q(('status__in', ('uploaded', 'queued', 'ready', 'failed', 'cancelled')), ('worker_token__isnull', False)), _connector='OR'), fields=['id'], name='job_audit_lease'), models.Index(condition=models.Q(('progress__lt', 0), ('progress__gt', 100), models.Q(('progress__gte', 100), models.Q(('status', 'ready'), _negated=True)), models.Q(('status', 'ready'), models.Q(('progress', 100), _negated=True)), _connector='OR'), fields=['id'], name='job_audit_progress'), models.Index(condition=models.Q(('finished_at__isnull', False), ('status__in', ('ready', 'cancelled')), ('updated_at__gt', models.F('finished_at'))), fields=['id'], name='job_audit_written_after_finish'), models.Index(fields=['tenant', 'status'], name='job_tenant_status'), models.Index(fields=['subject_id', 'subject_version'], name='job_subject')],
                'constraints': [models.UniqueConstraint(fields=('kind', 'subject_id', 'subject_version'), name='job_one_per_subject_version'), models.CheckConstraint(condition=models.Q(('progress__gte', 0), ('progress__lte', 100)), name='job_progress_0_100'), models.CheckConstraint(condition=models.Q(('progress__lt', 100), ('status', 'ready'), _connector='OR'), name='job_100_only_when_ready'), models.CheckConstraint(condition=models.Q(models.Q(('status__in', ('running', 'cancel_requested')), _negated=True), models.Q(('worker_token__isnull', False), ('heartbeat_at__isnull', False)), _connector='OR'), name='job_leased_has_token_and_heartbeat'), models.CheckConstraint(condition=models.Q(models.Q(('status__in', ('uploaded', 'queued', 'ready', 'failed', 'cancelled')), _negated=True), ('worker_token__isnull', True), _connector='OR'), name='job_unleased_has_no_token'), models.CheckConstraint(condition=models.Q(('status__in', ['uploaded', 'queued', 'running', 'cancel_requested', 'stalled', 'ready', 'failed', 'cancelled'])), name='job_status_known')],
            },
            bases=(django_fsm.FSMModelMixin, models.Model),
        ),
        migrations.CreateModel(
            name='StalledJob',
            fields=[
            ],
            options={
                'verbose_name': 'stalled job',
                'verbose_name_plural': 'stalled jobs',
                'ordering': ['stalled_at'],
                'proxy': True,
                'default_permissions': (),
                'indexes': [],
                'constraints': [],
            },
            bases=('jobs.job',),
        ),
        migrations.CreateModel(
            name='TimingBucket',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(max_length=64)),
                ('stage', models.CharField(max_length=32)),
                ('metric', models.CharField(max_length=16)),
                ('hour', models.DateTimeField()),
                ('bucket', models.PositiveSmallIntegerField()),
                ('count', models.BigIntegerField(default=0)),
                ('total', models.FloatField(default=0.0, help_text='Sum of the seconds counted here.')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('hour', 'kind', 'stage', 'metric', 'bucket'), name='timingbucket_key')],
            },
        ),
        migrations.CreateModel(
            name='JobEvent',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('at', models.DateTimeField(default=django.utils.timezone.now)),
                ('kind', models.CharField(choices=[('transition', 'Transition'), ('progress', 'Progress'), ('note', 'Note')], max_length=16)),
                ('name', models.CharField(help_text="Transition name, or 'progress'.", max_length=32)),
                ('actor', models.CharField(choices=[('worker', 'Worker'), ('user', 'User'), ('operator', 'Operator'), ('reaper', 'Reaper'), ('system', 'System')], max_length=16)),
                ('actor_name', models.CharField(blank=True, default='', max_length=150)),
                ('from_status', models.CharField(blank=True, default='', max_length=20)),
                ('to_status', models.CharField(blank=True, default='', max_length=20)),
                ('stage', models.CharField(blank=True, default='', max_length=32)),
                ('attempt', models.PositiveIntegerField(default=0)),
                ('job_version', models.PositiveBigIntegerField(default=0)),
                ('progress', models.FloatField(blank=True, null=True)),
                ('processed', models.PositiveIntegerField(blank=True, null=True)),
                ('total', models.PositiveIntegerField(blank=True, null=True)),
                ('reason', models.CharField(blank=True, default='', max_length=500)),
                ('job', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='events', to='jobs.job')),
            ],
            options={
                'ordering': ['id'],
                'indexes': [models.Index(fields=['job', 'id'], name='jobevent_job_id'), models.Index(fields=['at'], name='jobevent_at'), models.Index(condition=models.Q(('from_status__in', ('ready', 'cancelled')), ('kind', 'transition')), fields=['job'], name='jobevent_audit_left_terminal')],
            },
        ),
        migrations.CreateModel(
            name='StageRun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('stage', models.CharField(max_length=32)),
                ('attempt', models.PositiveIntegerField()),
                ('worker_token', models.CharField(max_length=64)),
                ('worker_name', models.CharField(max_length=128)),
                ('started_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('outcome', models.CharField(choices=[('running', 'Running'), ('advanced', 'Advanced'), ('skipped', 'Skipped'), ('ready', 'Ready'), ('retry', 'Retry'), ('failed', 'Failed'), ('cancelled', 'Cancelled'), ('lost', 'Lost'), ('handed_back', 'Handed Back')], default='running', max_length=16)),
                ('error_code', models.CharField(blank=True, default='', max_length=64)),
                ('error_type', models.CharField(blank=True, default='', max_length=200)),
                ('error_detail', models.TextField(blank=True, default='')),
                ('traceback', models.TextField(blank=True, default='')),
                ('hints', models.JSONField(blank=True, default=dict)),
                ('job', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='runs', to='jobs.job')),
            ],
            options={
                'ordering': ['started_at', 'id'],
                'indexes': [models.Index(fields=['stage', 'started_at'], name='stagerun_stage_started'), models.Index(fields=['finished_at'], name='stagerun_finished')],
                'constraints': [models.UniqueConstraint(condition=models.Q(('outcome', 'running')), fields=('job',), name='stagerun_one_running_per_job')],
            },
        ),
        migrations.RunPython(create_schedule, remove_schedule),
        migrations.RunPython(_on_postgresql(NOTIFY), _on_postgresql(UNNOTIFY)),
        *(
            migrations.RunSQL(sql=f"CREATE INDEX {name} {body}", reverse_sql=f"DROP INDEX {name}")
            for name, body in HEALTH_INDEXES.items()
        ),
    ]
