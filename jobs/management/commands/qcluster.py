"""``manage.py qcluster``: django-q2's cluster, with a leader that drains it on SIGTERM.

django-q2's own leader stops its sentinel through a shared event and waits for it without a
bound. Two ways that went wrong: a SIGTERM to the leader alone let a busy
worker finish its whole stage first (possibly an hour), and a SIGTERM to the whole process group
(systemd's ``KillMode=control-group``, ``kill -- -PGID``) killed the sentinel in the middle of a
wait on that event, so the leader blocked for ever on its lock beside a defunct sentinel, while
workers that lost their sentinel lived on as orphans.

This leader runs the same cluster and, on SIGTERM or SIGINT:

1. tells the sentinel to stop (from a helper thread: the event may be unusable when the sentinel
   died holding it) and sends SIGTERM to every process below the sentinel (and to any that appears
   there during the drain), so each worker stops its stage at the next safe point and hands the
   job back queued at its checkpoint (jobs/drain.py);
2. waits for its whole process tree to exit, up to ``JOBS_DRAIN_SECONDS``;
3. kills whatever is left at that bound, collects it and exits.

It is a child subreaper, so processes orphaned below it (a sentinel's workers, a worker's children)
are still its descendants and still covered by step 3; and every process it forks asks for
SIGTERM when its parent dies, so even a leader killed outright (SIGKILL) takes its tree down
through the drain.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from typing import Any

from django.conf import settings
from django_q.cluster import Cluster
from django_q.management.commands.qcluster import Command as QClusterCommand

from jobs import drain, proctree

log = logging.getLogger(__name__)

_REAP_EVERY = 5.0  # seconds between collections of orphans that exited while the cluster runs
_fork_hook = threading.Event()


def _die_with_parent() -> None:
    proctree.die_with_parent(signal.SIGTERM)


class Command(QClusterCommand):
    help = "Start the django-q2 cluster; SIGTERM drains it (jobs handed back) within JOBS_DRAIN_SECONDS."

    def handle(self, *args: Any, **options: Any) -> None:
        settings.SECRET_KEY  # noqa: B018 - q2 signs its task packages with it: refuse to start without
        if options.get("cluster_name"):
            os.environ["Q_CLUSTER_NAME"] = options["cluster_name"]
        proctree.become_subreaper()
        if not _fork_hook.is_set():
            _fork_hook.set()
            os.register_at_fork(after_in_child=_die_with_parent)
        stop = threading.Event()
        cluster = Cluster()  # installs django-q2's handlers, which the next lines replace

        def request_stop(signum: int, frame: Any) -> None:
            stop.set()

        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)
        cluster.start()
        sentinel = cluster.sentinel
        assert sentinel is not None
        since_reap = 0.0
        while not options.get("run_once") and not stop.wait(0.5):
            if not sentinel.is_alive():
                log.error("the q2 sentinel exited on its own; stopping the cluster")
                break
            since_reap += 0.5
            if since_reap >= _REAP_EVERY:
                since_reap = 0.0
                self._reap_orphans(sentinel.pid)
        code = drain_cluster(cluster)
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        # Not a normal interpreter exit: multiprocessing would join the sentinel and a helper
        # thread may be stuck on the dead sentinel's event; everything below is gone by now.
        os._exit(code)

    @staticmethod
    def _reap_orphans(sentinel_pid: int | None) -> None:
        # Orphans re-parented here (we are their subreaper) become zombies when they exit.
        mine = [pid for pid, parent in proctree.parents().items() if parent == os.getpid()]
        proctree.reap([pid for pid in mine if pid != sentinel_pid and not proctree.alive(pid)])


def drain_cluster(cluster: Cluster) -> int:
    """Stop the cluster and its whole process tree within ``JOBS_DRAIN_SECONDS``; the exit code:
    0 when everything exited by itself, 1 when stragglers had to be killed."""
    bound = drain.drain_seconds()
    deadline = time.monotonic() + bound
    sentinel = cluster.sentinel
    assert sentinel is not None and sentinel.pid is not None
    log.warning("q2 cluster %s draining (bound %.0fs)", cluster.name, bound)
    me = os.getpid()
    if cluster.stop_event is not None:
        # Before the workers hear of it, so the sentinel does not start fresh ones in their place.
        setter = threading.Thread(target=cluster.stop_event.set, name="q2-stop", daemon=True)
        setter.start()
        setter.join(timeout=1.0)
    signalled: set[int] = set()
    while time.monotonic() < deadline:
        current = proctree.descendants(me)
        # Everything below the sentinel, including what a stage started after the first sweep
        # (a fresh child of a worker still on its way to a safe point): its exit brings the
        # stage to an end at once, and the work it did was not checkpointed anyway.
        fresh = [pid for pid in current if pid != sentinel.pid and pid not in signalled]
        proctree.signal_all(fresh, signal.SIGTERM)
        signalled.update(fresh)
        proctree.reap([pid for pid in current if pid != sentinel.pid and not proctree.alive(pid)])
        sentinel.join(timeout=0)  # collects the sentinel when it has exited
        # The sentinel's own liveness as well: without /proc (not Linux) the list is empty.
        if not sentinel.is_alive() and not [pid for pid in current if proctree.alive(pid)]:
            log.warning("q2 cluster %s drained", cluster.name)
            return 0
        time.sleep(0.1)  # the drain's poll interval, bounded by the deadline above
    # Orphans of the tree are re-parented to this process (a subreaper), so its descendants are
    # everything that is left.
    left = [pid for pid in proctree.descendants(me) if proctree.alive(pid)]
    log.error(
        "q2 cluster %s: %d process(es) still running after %.0fs; killing them",
        cluster.name,
        len(left),
        bound,
    )
    proctree.signal_all(left, signal.SIGKILL)
    if sentinel.is_alive():
        sentinel.kill()
    kill_deadline = time.monotonic() + 5
    while time.monotonic() < kill_deadline and [pid for pid in left if proctree.alive(pid)]:
        proctree.reap(left)
        time.sleep(0.05)  # SIGKILL takes effect at once; this only waits for the kernel
    proctree.reap(left)
    return 1
