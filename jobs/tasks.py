"""django-q2 entry points. Thin: they call the executor and the reaper."""

from __future__ import annotations

from typing import Any

from django_q.conf import Conf

from jobs import drain
from jobs.executor import run_job as _run_job
from jobs.scratch import sweep_if_due
from jobs.services.reaper import reap


def run_job(job_id: Any) -> str:
    """Run the job's stages if this delivery wins the claim; otherwise return quietly."""
    sweep_if_due()  # what dead workers of this machine left in its temp directory
    if Conf.SYNC:
        # q2's sync mode runs the task in the process that queued it (a request, a command): no
        # worker of a cluster, so nothing may end that process.
        return _run_job(job_id)
    outcome = _run_job(job_id, exit_when_stuck=True)
    drain.exit_if_draining()  # a worker told to stop ends here, its stage handed back
    return outcome


def reap_jobs() -> dict[str, int]:
    """The scheduled reaper pass (the run command also keeps a faster loop beside the cluster)."""
    return reap().counts()
