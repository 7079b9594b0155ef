from importlib import import_module

from django.apps import AppConfig
from django.conf import settings
from django.utils.translation import gettext_lazy as _


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = _("Jobs")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Pipelines are registered from outside the engine: apps do it in their own ready(),
        # and deployments (or the test suite's worker processes) may name extra modules.
        for module in settings.JOBS_PIPELINE_MODULES:
            import_module(module)
        # Each q2 worker process writes an idle heartbeat, so idle workers count as live.
        from django_q.signals import post_spawn

        from jobs.drain import install_in_worker
        from jobs.workers import start_idle_heartbeat

        post_spawn.connect(start_idle_heartbeat, dispatch_uid="jobs.worker_beat")
        # SIGTERM makes a worker hand its job back at the next safe point (jobs/drain.py).
        post_spawn.connect(install_in_worker, dispatch_uid="jobs.drain")
