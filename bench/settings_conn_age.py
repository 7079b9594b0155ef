"""Diagnostic settings for bench/engine_throughput.py: the test settings (which register the toy
``test.noop`` pipeline) with persistent database connections (``CONN_MAX_AGE``, default 60 s).

The shipped settings force ``CONN_MAX_AGE = 0`` on PostgreSQL for every process. django-q2 calls
``close_old_connections()`` around each broker call, task and result save, so with 0 every one of
them opens a new PostgreSQL connection. This module exists only to measure the effect of the
suggested fix (persistent connections in the cluster processes); it changes nothing else.
"""

import os

from tests.settings import *  # noqa: F403
from tests.settings import DATABASES

DATABASES["default"]["CONN_MAX_AGE"] = float(os.environ.get("BENCH_CONN_MAX_AGE", "60"))
