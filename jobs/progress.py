"""Progress arithmetic: pure functions, no ORM.

Progress is a display. It is weighted by stage, counts skipped stages as done, uses a stage's
sub-progress only where a real total is known, never exceeds ``CAP_BEFORE_READY`` before the
job is ready, and never goes backwards (the database update keeps the greater value).
"""

from __future__ import annotations

from collections.abc import Sequence

CAP_BEFORE_READY = 99.0


def overall(
    weights: Sequence[float],
    stage_index: int,
    done: int | None = None,
    total: int | None = None,
) -> float:
    """Overall percentage with stages ``[0, stage_index)`` finished (or skipped).

    The current stage contributes ``done / total`` of its weight only when ``total`` is a real,
    positive count.
    """
    whole = float(sum(weights))
    if whole <= 0:
        return 0.0
    finished = float(sum(weights[:stage_index]))
    if total and total > 0 and done is not None and 0 <= stage_index < len(weights):
        finished += weights[stage_index] * min(max(done, 0), total) / total
    return round(min(CAP_BEFORE_READY, 100.0 * finished / whole), 2)


def displayed(progress: float, *, total: int | None, ready: bool, stopped: bool = False) -> float | None:
    """The number a user may be shown, or ``None`` when there is no honest number.

    A number is honest when the job is ready, when it stopped (failed or cancelled: how far it
    got, which no longer moves), when the current stage reports a real total, or once finished
    stages count for something: a stage that has not reported its total yet keeps showing the
    weight of the stages before it, so a number once shown never gives way to none. Before any
    of that the user sees "stage 1 of 5" and the time of the last update.
    """
    if ready:
        return 100.0
    if stopped or (total is not None and total > 0) or progress > 0:
        return progress
    return None
