"""Benchmark 7: detection and recovery times with the DEFAULT settings (takes about 3 minutes).

A real ``manage.py qcluster`` (Q_WORKERS=2, ORM broker) and a real ``manage.py reap_jobs`` loop
run on this run's own PostgreSQL database with the shipped defaults (lease 30 s, heartbeat 10 s,
reaper every 10 s, re-dispatch after 60 s).

A. Dead worker: a ``test.pages`` job (400 pages, 0.25 s each) runs; once it is a few pages in, its
   worker process is SIGKILLed. Measured from the kill: the reaper's ``mark_stalled`` event (target
   <= 45 s = lease 30 + reaper interval 10 + margin), its takeover, and the next claim by a live
   worker.
B. Lost queued task: the cluster is paused (SIGSTOP on its own process group), a ``test.noop`` job
   is created (its q2 task lands in the ORM broker), that task's OrmQ row is deleted, and the
   cluster resumes. Measured from the enqueue: the job's claim by a worker after the reaper
   re-dispatched it (target <= 120 s).

``--quick`` runs the same with short settings (lease 6 s, heartbeat 2 s, reaper 2 s, re-dispatch
after 12 s) and targets scaled the same way (lease + interval + 5 s; re-dispatch + 2 x interval +
10 s): it checks the mechanism, not the default figures.

    .venv/bin/python bench/recovery_times.py [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.common import say

DEFAULTS = {"lease": 30.0, "heartbeat": 10.0, "interval": 10.0, "redispatch": 60.0}
QUICK = {"lease": 6.0, "heartbeat": 2.0, "interval": 2.0, "redispatch": 12.0}


def event_at(job_id: Any, name: str, after_id: int = 0) -> tuple[int, float] | None:
    from jobs.models import JobEvent

    row = (
        JobEvent.objects.filter(job_id=job_id, name=name, id__gt=after_id)
        .order_by("id")
        .values_list("id", "at")
        .first()
    )
    return (row[0], row[1].timestamp()) if row else None


def dead_worker(timeout: float) -> dict[str, Any]:
    from jobs.models import Job
    from jobs.services.lifecycle import job_cancel, job_create
    from tests.testapp.models import Call

    job = job_create(
        kind="test.pages",
        tenant="bench",
        subject_id="dead-worker",
        payload={"pages": 400, "page_sleep": 0.25},
    )
    call = common.wait_for(
        lambda: Call.objects.filter(job_id=job.pk, stage="pages", unit__gte=3).order_by("unit").first(),
        timeout=90,
        interval=0.1,
        what="the job's third page",
    )
    killed_at = time.time()
    os.kill(call.pid, signal.SIGKILL)  # the q2 worker process running the stage (our own child)
    say(f"  killed worker pid {call.pid} at page {call.unit}")
    stalled = common.wait_for(
        lambda: event_at(job.pk, "mark_stalled"), timeout=timeout, interval=0.2, what="mark_stalled"
    )
    took = common.wait_for(
        lambda: event_at(job.pk, "take_over", stalled[0]), timeout=60, interval=0.2, what="take_over"
    )
    claimed = common.wait_for(
        lambda: event_at(job.pk, "claim", took[0]), timeout=120, interval=0.2, what="the next claim"
    )
    job = Job.objects.get(pk=job.pk)
    out = {
        "killed_page": call.unit,
        "stalled_after_s": stalled[1] - killed_at,
        "taken_over_after_s": took[1] - killed_at,
        "claimed_again_after_s": claimed[1] - killed_at,
    }
    job_cancel(job_id=job.pk)  # stop the long job; the next part needs a quiet cluster
    common.wait_for(
        lambda: Job.objects.get(pk=job.pk).status == "cancelled", timeout=60, interval=0.5, what="the cancel"
    )
    return out


def lost_task(cluster_pid: int, timeout: float) -> dict[str, Any]:
    from django_q.models import OrmQ

    from jobs.models import Job
    from jobs.services.lifecycle import job_create

    os.killpg(cluster_pid, signal.SIGSTOP)  # our own cluster's process group: nobody dequeues now
    try:
        job = job_create(kind="test.noop", tenant="bench", subject_id="lost-task")
        enqueued = Job.objects.get(pk=job.pk).queued_at.timestamp()
        tasks = list(OrmQ.objects.all())
        assert any(str(job.pk) in str(t.task.get("args")) for t in tasks), (
            "the job's task is not in the broker"
        )
        lost_at = time.time()
        OrmQ.objects.filter(pk__in=[t.pk for t in tasks if str(job.pk) in str(t.task.get("args"))]).delete()
    finally:
        os.killpg(cluster_pid, signal.SIGCONT)
    say(f"  deleted the job's OrmQ row {lost_at - enqueued:.2f} s after its enqueue; cluster resumed")
    claimed = common.wait_for(
        lambda: event_at(job.pk, "claim"), timeout=timeout, interval=0.25, what="the claim"
    )
    common.wait_for(
        lambda: Job.objects.get(pk=job.pk).status == "ready", timeout=60, interval=0.25, what="ready"
    )
    return {"claimed_after_enqueue_s": claimed[1] - enqueued, "claimed_after_loss_s": claimed[1] - lost_at}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    common.common_args(parser)
    args = parser.parse_args()
    cfg = QUICK if args.quick else DEFAULTS
    stall_target = 45.0 if not args.quick else cfg["lease"] + cfg["interval"] + 5
    redispatch_target = 120.0 if not args.quick else cfg["redispatch"] + 2 * cfg["interval"] + 10

    common.header(
        f"recovery times: lease {cfg['lease']:g} s, heartbeat {cfg['heartbeat']:g} s, reaper every "
        f"{cfg['interval']:g} s, re-dispatch after {cfg['redispatch']:g} s"
        + (" (QUICK: not the defaults)" if args.quick else " (the shipped defaults)")
    )
    common.print_machine()
    report = common.Report("recovery_times")
    with (
        common.bench_database("recovery", keep=args.keep) as (_, url),
        common.temp_dir("recovery", args.keep) as tmp,
    ):
        extra = {}
        if args.quick:
            extra = {
                "JOBS_LEASE_SECONDS": str(cfg["lease"]),
                "JOBS_HEARTBEAT_SECONDS": str(cfg["heartbeat"]),
                "JOBS_REAPER_INTERVAL": str(cfg["interval"]),
                "JOBS_REDISPATCH_AFTER": str(cfg["redispatch"]),
            }
        env = common.base_env(
            settings="tests.settings", database_url=url, var_dir=tmp, Q_WORKERS="2", **extra
        )
        for key in (
            "JOBS_LEASE_SECONDS",
            "JOBS_HEARTBEAT_SECONDS",
            "JOBS_REAPER_INTERVAL",
            "JOBS_REDISPATCH_AFTER",
        ):
            if not args.quick:
                env.pop(key, None)  # the shipped defaults, whatever this shell has set
        common.setup_django(env)
        common.migrate()
        children = common.Children(tmp)
        try:
            cluster = children.manage("qcluster", ["qcluster"], env)
            children.manage("reaper", ["reap_jobs"], env)
            say("A. dead worker (SIGKILL mid-stage):")
            dead = dead_worker(timeout=stall_target * 3)
            say(
                f"  marked stalled {dead['stalled_after_s']:.1f} s after the kill, taken over at "
                f"{dead['taken_over_after_s']:.1f} s, claimed by a live worker at "
                f"{dead['claimed_again_after_s']:.1f} s"
            )
            say("B. lost queued task (OrmQ row deleted):")
            lost = lost_task(cluster.pid, timeout=redispatch_target * 3)
            say(
                f"  claimed {lost['claimed_after_enqueue_s']:.1f} s after its enqueue "
                f"({lost['claimed_after_loss_s']:.1f} s after the loss)"
            )
        except Exception:
            say(children.log_tail("reaper"))
            say(children.log_tail("qcluster"))
            raise
        finally:
            children.stop_all()
    report.figures.update({"settings": cfg, "dead_worker": dead, "lost_task": lost})
    report.check(
        "dead worker: stalled after kill",
        dead["stalled_after_s"],
        stall_target,
        higher_is_better=False,
        unit=" s",
    )
    report.check(
        "lost task: claimed after enqueue",
        lost["claimed_after_enqueue_s"],
        redispatch_target,
        higher_is_better=False,
        unit=" s",
    )
    report.notes.append(
        f"bounds: stall <= lease {cfg['lease']:g} + reaper {cfg['interval']:g} s after the last heartbeat; "
        f"re-dispatch >= {cfg['redispatch']:g} s after the dispatch, then the next reaper pass"
    )
    report.print()
    report.dump(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
