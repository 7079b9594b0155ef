"""Indexes that bound the health figures (jobs/health.py) by what is live or recent, never by how
many jobs ever ran.

Raw SQL, not ``Meta.indexes``: the Job model's Meta is being reshaped in another branch at the
same time; these can move into it (same names) once both have landed. Partial indexes and this
syntax work on SQLite and PostgreSQL alike.
"""

from django.db import migrations

ACTIVE = "('uploaded', 'queued', 'running', 'cancel_requested', 'stalled')"

INDEXES = {
    # Jobs by kind, status and stage, and the tenants' loads: only the jobs not yet finished.
    "job_health_active": f"ON jobs_job (status, kind, stage, tenant) WHERE status IN {ACTIVE}",
    # Failed jobs by cause in the last day: a range of the failed jobs' finish times.
    "job_health_failed": "ON jobs_job (finished_at, error_code) WHERE status = 'failed'",
    # Live workers: the jobs whose heartbeat is within the last lease period.
    "job_health_heartbeat": "ON jobs_job (heartbeat_at) WHERE heartbeat_at IS NOT NULL",
}


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0008_timing_buckets"),
    ]

    operations = [
        migrations.RunSQL(sql=f"CREATE INDEX {name} {body}", reverse_sql=f"DROP INDEX {name}")
        for name, body in INDEXES.items()
    ]
