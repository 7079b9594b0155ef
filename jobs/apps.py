from importlib import import_module
from typing import Any

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
        from django_q.signals import post_spawn

        post_spawn.connect(worker_spawned, dispatch_uid="jobs.worker_spawned")


def worker_spawned(**signal: Any) -> None:
    """``post_spawn`` receiver: each q2 worker process writes an idle heartbeat, so idle workers
    count as live, and SIGTERM makes it hand its job back at the next safe point (jobs/drain.py).
    q2's sync mode (``Q_SYNC``) sends the signal in the process that queued the task (a request,
    a command, a test): that process is no worker, and must get neither."""
    from django_q.conf import Conf

    from jobs.drain import install_in_worker
    from jobs.workers import start_idle_heartbeat

    if Conf.SYNC:
        return
    start_idle_heartbeat(**signal)
    install_in_worker(**signal)
