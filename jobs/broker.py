"""The broker ``jobs.dispatch`` enqueues through: django-q2's own, minus a reconnect per task."""

from __future__ import annotations

from functools import cache
from typing import Any

from django_q.brokers import Broker, get_broker
from django_q.brokers.orm import ORM
from django_q.conf import Conf
from django_q.models import OrmQ


class EnqueueingORM(ORM):
    """q2's ORM broker for enqueueing from a request or a worker's task.

    q2's ORM broker closes the thread's obsolete connections before every call, which suits its
    own long-lived cluster threads; in a process without persistent connections
    (``CONN_MAX_AGE=0``: the web tier, the in-process CLI) that closed the connection still in
    use, twice per dispatch, and the caller's next query reconnected. Enqueueing needs none of
    it: the row is inserted on the caller's connection, whatever its age policy.
    """

    @staticmethod
    def get_connection(list_key: str | None = None) -> Any:
        return OrmQ.objects.using(Conf.ORM)


@cache
def enqueue_broker(queue: str | None = None) -> Broker:
    """One broker per process and queue for ``async_task(..., broker=...)``; Redis and others as
    q2 builds them. ``queue``: one of ``Q_CLUSTER``'s ``ALT_CLUSTERS`` (default: the jobs' own)."""
    if Conf.ORM and not Conf.BROKER_CLASS:
        return EnqueueingORM(list_key=queue or Conf.CLUSTER_NAME)
    return get_broker(queue)
