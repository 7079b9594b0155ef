"""On PostgreSQL every inserted job event sends ``pg_notify('job_events', '<job id>:<event id>')``
from a trigger: delivered at commit, never for a rolled-back insert, and without a round trip of
its own (it used to be a separate ``SELECT pg_notify`` after each insert)."""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION jobs_jobevent_notify() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('job_events', NEW.job_id::text || ':' || NEW.id::text);
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER jobs_jobevent_notify AFTER INSERT ON jobs_jobevent
    FOR EACH ROW EXECUTE FUNCTION jobs_jobevent_notify();
"""

DROP = """
DROP TRIGGER IF EXISTS jobs_jobevent_notify ON jobs_jobevent;
DROP FUNCTION IF EXISTS jobs_jobevent_notify();
"""


def _on_postgresql(sql):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [("jobs", "0006_audit_indexes_and_watermark")]

    operations = [migrations.RunPython(_on_postgresql(CREATE), _on_postgresql(DROP))]
