"""Time that passes on purpose in a test double: a slow provider, a handler busy with a page, a
frontend's polling interval.

Tests never sleep to wait for something to happen: they wait on a condition with a deadline
(``tests.conftest.wait_for``). What remains is work that takes time by its nature, and it goes
through :func:`hold_for` so that it says so.
"""

from __future__ import annotations

import time


def hold_for(seconds: float) -> None:
    """Stand in for work (or an interval) that takes ``seconds``: blocks the calling thread, as
    the real thing would (a long native call holds it too)."""
    time.sleep(seconds)
