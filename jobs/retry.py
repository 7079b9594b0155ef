"""Retry policy: a pure decision from (rule, attempt, provider hint) to retry-or-fail.

No database, no clock: the caller passes the attempt number and a random source, so every
branch is unit-tested on its own.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RetryRule:
    """How one cause is retried.

    ``max_attempts`` counts every attempt of the stage, the first included: 1 means never
    retried automatically. Delays grow by ``factor`` from ``base_delay`` up to ``max_delay``,
    with "equal jitter" (half fixed, half random) so that many jobs failing together spread
    out. ``adjustments`` are hints for successive retries, e.g. a smaller batch, then the
    alternative engine ("adjust and retry").
    """

    max_attempts: int = 3
    base_delay: float = 5.0
    max_delay: float = 600.0
    factor: float = 2.0
    adjustments: tuple[dict[str, Any], ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Decision:
    retry: bool
    delay: float = 0.0
    hints: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def give_up(cls) -> Decision:
        return cls(retry=False)


def backoff_delay(rule: RetryRule, attempt: int, rng: random.Random | None = None) -> float:
    """Delay before the retry that follows failed attempt number ``attempt`` (1-based)."""
    rng = rng or random.Random()
    ceiling = min(rule.max_delay, rule.base_delay * rule.factor ** max(0, attempt - 1))
    return ceiling / 2 + rng.uniform(0, ceiling / 2)


def decide(
    rule: RetryRule,
    attempt: int,
    *,
    retry_after: float | None = None,
    rng: random.Random | None = None,
) -> Decision:
    """Decide what follows a failed attempt.

    ``attempt`` is the 1-based number of the attempt that just failed. A provider's
    ``retry_after`` is honoured as a floor (never retry earlier than asked), still capped at
    ``max_delay`` so a hostile header cannot park a job for days.
    """
    if attempt >= rule.max_attempts:
        return Decision.give_up()
    delay = backoff_delay(rule, attempt, rng)
    if retry_after is not None and retry_after > 0:
        delay = min(rule.max_delay, max(delay, retry_after))
    hints: dict[str, Any] = {}
    if rule.adjustments:
        # Adjustments accumulate: the third attempt keeps the smaller batch of the second.
        for adjustment in rule.adjustments[: min(attempt, len(rule.adjustments))]:
            hints.update(adjustment)
    return Decision(retry=True, delay=delay, hints=hints)
