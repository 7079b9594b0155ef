"""django-q2's cluster settings from the environment, read by a fresh import of ``config.settings``
(the test run's own settings are already loaded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT


def q_cluster(**env: str) -> dict[str, object]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("Q_")}
    script = "import json, config.settings as s; print(json.dumps(s.Q_CLUSTER))"
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**base, "SECRET_KEY": "test-only-key", "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded: dict[str, object] = json.loads(done.stdout)
    return loaded


def test_q_recycle_sets_how_many_tasks_a_worker_runs_before_it_is_replaced() -> None:
    assert q_cluster()["recycle"] == 500  # django-q2's default
    assert q_cluster(Q_RECYCLE="7")["recycle"] == 7
