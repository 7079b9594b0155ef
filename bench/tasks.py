"""django-q2 task used by the q2-alone baseline of bench/engine_throughput.py."""

from __future__ import annotations


def noop(*args: object) -> None:
    """Does nothing: the q2 baseline measures the broker and the cluster alone."""
    return None
