"""Fixtures shared by the engine's tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def fast_engine(settings):
    """Leases, heartbeats and progress writes at test speed (in-process runs)."""
    settings.JOBS_LEASE_SECONDS = 2
    settings.JOBS_HEARTBEAT_SECONDS = 0.1
    settings.JOBS_PROGRESS_WRITE_SECONDS = 0
    settings.JOBS_PROGRESS_EVENT_SECONDS = 0
