"""What an operator may do to a job, when, with which permission, and through which service.

Each action is one service call (``jobs.services.lifecycle``) carrying the version the operator
saw, the operator's username and a reason; the service's compare-and-set is what changes the
job. This module asks the one table of ``jobs/rules.py`` whether an action applies to a job (the
same answer the services, the API and the pages get) and runs it; ``jobs/admin/mixins.py`` is the admin
glue (confirmation page, messages, 403).

Permissions (``Powers``):

* ``operate`` - ``jobs.change_job``: cancel, give up, retry where the cause allows it, retry
  variants. (The admin never edits a job through a form, so "change" means "operate".)
* ``takeover`` - ``jobs.takeover_job``: take over a stalled job, revoking the lost worker's lease.
* ``force_retry`` - ``jobs.force_retry_job``: retry past a cause users may not retry, restart
  from the first stage.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from jobs import pipelines, rules
from jobs.admin.display import short_id
from jobs.admin.registry import RetryVariant, retry_variants
from jobs.errors import JobConflict, TransitionRefused, get_cause
from jobs.models import Actor, Job
from jobs.services.lifecycle import job_cancel, job_give_up, job_retry, job_take_over

OPERATE, TAKEOVER, FORCE_RETRY = "operate", "takeover", "force_retry"
PERMISSION_CODES = {
    OPERATE: "jobs.change_job",
    TAKEOVER: "jobs.takeover_job",
    FORCE_RETRY: "jobs.force_retry_job",
}


def has_power(user: Any, permission: str) -> bool:
    """Staff with the permission (``request.user``: a user or AnonymousUser)."""
    return bool(user.is_active and user.is_staff and user.has_perm(PERMISSION_CODES[permission]))


@dataclass(frozen=True)
class Request:
    """Who asks, which version they saw, and why."""

    actor_name: str
    expected_version: int
    reason: str


@dataclass(frozen=True)
class OperatorAction:
    name: str
    label: str  # the admin's action menu
    done: str  # "taken over": how the success message reads
    permission: str
    applies: Callable[[Job], str | None]  # None when it applies, otherwise why not
    run: Callable[[Job, Request], Job]
    explanation: str = ""  # what the confirmation page says it will do


# --- why an action does (not) apply: the one table in jobs/rules.py ----------------------------


def _table(name: str) -> Callable[[Job], str | None]:
    def applies(job: Job) -> str | None:
        return rules.refusal(name, job)

    return applies


can_take_over = _table("take_over")
can_give_up = _table("give_up")
can_cancel = _table("cancel")


def can_retry(job: Job) -> str | None:
    """The table's answer, plus what to click when only a forced retry would do."""
    why = rules.refusal("retry", job)
    if why is not None and rules.allowed("force_retry", job):
        why += " To retry anyway, use “Force a retry of the failed stage” (force-retry permission)."
    return why


can_retry_forced = _table("force_retry")


def _variant_applies(variant: RetryVariant) -> Callable[[Job], str | None]:
    def applies(job: Job) -> str | None:
        if not variant.fits(job):
            return f"only for {variant.kind} jobs that failed at {' or '.join(variant.stages)}"
        return can_retry(job)

    return applies


# --- the service calls ------------------------------------------------------------------------


def _as_operator(service: Callable[..., Job]) -> Callable[[Job, Request], Job]:
    """``service`` called for ``job`` by the operator of ``r``, at the version they saw."""

    def run(job: Job, r: Request) -> Job:
        return service(
            job_id=job.pk,
            actor=Actor.OPERATOR,
            actor_name=r.actor_name,
            expected_version=r.expected_version,
            reason=r.reason,
        )

    return run


_take_over = _as_operator(job_take_over)
_give_up = _as_operator(job_give_up)
_cancel = _as_operator(job_cancel)


def _retry(*, force: bool, restart: bool = False, hints: dict[str, Any] | None = None) -> Callable[..., Job]:
    def run(job: Job, r: Request) -> Job:
        reason = r.reason
        if force and not get_cause(job.error_code).user_retryable:
            # The audit trail must say the cause was overridden, whatever the operator typed.
            reason = f"{reason} [forced past cause {job.error_code or 'unknown'}]"
        return job_retry(
            job_id=job.pk,
            actor=Actor.OPERATOR,
            actor_name=r.actor_name,
            expected_version=r.expected_version,
            stage=pipelines.get(job.kind).first_stage if restart else None,
            hints=hints,
            force=force,
            reason=reason,
        )

    return run


FIXED_ACTIONS: tuple[OperatorAction, ...] = (
    OperatorAction(
        "take_over",
        "Take over stalled jobs (revoke the lost worker's lease, queue again)",
        "taken over",
        TAKEOVER,
        can_take_over,
        _take_over,
        "The lost worker's lease is revoked in the same write, so if it was only slow it can no "
        "longer write anything; the job is queued again at its stage and resumes from its checkpoint.",
    ),
    OperatorAction(
        "give_up",
        "Give up stalled jobs (fail them: worker lost)",
        "given up",
        OPERATE,
        can_give_up,
        _give_up,
        "The job fails with the cause 'worker lost' and its unpublished outputs are removed. It can "
        "still be retried later.",
    ),
    OperatorAction(
        "retry",
        "Retry the failed stage (where the cause allows it)",
        "queued again",
        OPERATE,
        can_retry,
        _retry(force=False),
        "The job is queued again at the stage that failed.",
    ),
    OperatorAction(
        "force_retry",
        "Force a retry of the failed stage (override the cause)",
        "queued again (forced)",
        FORCE_RETRY,
        can_retry_forced,
        _retry(force=True),
        "The job is queued again at the stage that failed, even where the failure's cause says a "
        "retry will not help. The event records that the cause was overridden.",
    ),
    OperatorAction(
        "restart",
        "Restart from the first stage (forced)",
        "restarted from the first stage",
        FORCE_RETRY,
        can_retry_forced,
        _retry(force=True, restart=True),
        "The job is queued again at the first stage of its pipeline; its progress starts over.",
    ),
    OperatorAction(
        "cancel",
        "Cancel (queued: at once; running: at the next safe point)",
        "cancelled or asked to stop",
        OPERATE,
        can_cancel,
        _cancel,
        "A queued job is cancelled at once; a running job's worker stops at its next safe point.",
    ),
)


def all_actions() -> list[OperatorAction]:
    """The fixed actions and the retry variants apps registered, in menu order."""
    variants = [
        OperatorAction(
            v.name,
            v.label,
            "queued again with " + ", ".join(f"{k}={val}" for k, val in v.hints.items()),
            OPERATE,
            _variant_applies(v),
            _retry(force=False, hints=dict(v.hints)),
            v.description or f"The job is queued again at the failed stage with the hints {dict(v.hints)}.",
        )
        for v in retry_variants()
    ]
    fixed = list(FIXED_ACTIONS)
    return fixed[:3] + variants + fixed[3:]


def get_action(name: str) -> OperatorAction | None:
    return next((a for a in all_actions() if a.name == name), None)


# --- running one action on many jobs ----------------------------------------------------------

DONE, SKIPPED, CONFLICT, REFUSED, MISSING = "done", "skipped", "conflict", "refused", "missing"


@dataclass(frozen=True)
class Outcome:
    job_id: Any
    result: str  # DONE | SKIPPED | CONFLICT | REFUSED | MISSING
    reason: str = ""


def perform(
    action: OperatorAction, job: Job | None, job_id: Any, seen: int | None, *, actor_name: str, reason: str
) -> Outcome:
    """Run ``action`` on one job as the operator ``actor_name`` saw it, at version ``seen``.

    A job that changed since (any version bump) is a conflict and is left untouched, even when
    the action would still apply: the operator decided on a state that no longer exists.
    """
    if job is None:
        return Outcome(job_id, MISSING, "not found (deleted?)")
    if seen is None:
        return Outcome(job.pk, CONFLICT, "the page did not say which version you saw")
    if job.version != seen:
        return Outcome(job.pk, CONFLICT, "changed since you looked")
    why_not = action.applies(job)
    if why_not is not None:
        return Outcome(job.pk, SKIPPED, why_not)
    try:
        action.run(job, Request(actor_name, seen, reason))
    except TransitionRefused as exc:
        return Outcome(job.pk, REFUSED, exc.message)
    except JobConflict:
        return Outcome(job.pk, CONFLICT, "changed since you looked")
    return Outcome(job.pk, DONE)


@dataclass(frozen=True)
class OutcomeGroup:
    result: str
    reason: str
    job_ids: list[Any]

    def text(self, action: OperatorAction, limit: int = 25) -> str:
        ids = [short_id(pk) for pk in self.job_ids]
        listed = ", ".join(ids[:limit]) + (f" and {len(ids) - limit} more" if len(ids) > limit else "")
        n = len(ids)
        jobs = "job" if n == 1 else "jobs"
        if self.result == DONE:
            return f"{n} {jobs} {action.done}: {listed}."
        if self.result == CONFLICT:
            return (
                f"Conflict: {n} {jobs} {self.reason} and {'was' if n == 1 else 'were'} left unchanged; "
                f"reload the page and decide again: {listed}."
            )
        if self.result == REFUSED:
            return f"Refused for {n} {jobs} ({self.reason}): {listed}."
        return f"Skipped {n} {jobs} ({self.reason}): {listed}."


def group_outcomes(outcomes: Iterable[Outcome]) -> list[OutcomeGroup]:
    """One group per (result, reason), in the order they first occurred, done first."""
    groups: dict[tuple[str, str], list[Any]] = {}
    for outcome in outcomes:
        groups.setdefault((outcome.result, outcome.reason), []).append(outcome.job_id)
    order = {DONE: 0, CONFLICT: 1, REFUSED: 2, SKIPPED: 3, MISSING: 4}
    items = sorted(groups.items(), key=lambda item: order[item[0][0]])
    return [OutcomeGroup(result, reason, ids) for (result, reason), ids in items]
