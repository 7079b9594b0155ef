"""The django-q2 schedule that runs the reaper once a minute (the run command also keeps a
faster reaper loop beside the cluster, since q2 schedules run at most once a minute)."""

from django.db import migrations


def create_schedule(apps, schema_editor):  # type: ignore[no-untyped-def]
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.get_or_create(
        name="jobs-reaper",
        defaults={"func": "jobs.tasks.reap_jobs", "schedule_type": "I", "minutes": 1, "repeats": -1},
    )


def remove_schedule(apps, schema_editor):  # type: ignore[no-untyped-def]
    apps.get_model("django_q", "Schedule").objects.filter(name="jobs-reaper").delete()


class Migration(migrations.Migration):
    dependencies = [("jobs", "0001_initial"), ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more")]
    operations = [migrations.RunPython(create_schedule, remove_schedule)]
