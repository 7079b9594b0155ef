"""The one answer to "may this action be taken on this job, and if not, why".

Every face asks this table: the services before their compare-and-set (a refusal becomes a
``TransitionRefused`` with the reason, which the API answers as 409), the admin (which actions
and buttons apply to a job), the status JSON (``can_cancel`` / ``can_retry``, which the pages
use to show their buttons). The state graph in ``jobs/models.py`` stays the final guard: an
action allowed here still goes through its django-fsm transition and the version check, so a
race between the check and the write ends in a conflict, never in an illegal state.

Each action names the statuses it is allowed from, a user-safe reason for every other status,
and an extra condition (the failure's cause, a pending cleanup, a pending cancel). Apps that own
a job kind may register more actions (e.g. one that starts a new run of a finished job's
subject) with :func:`register_action`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from jobs import pipelines
from jobs.errors import TransitionRefused, get_cause
from jobs.models import Status

S = Status
FINISHED_REASON = "The job has already finished ({state})."


class JobState(Protocol):
    """What the table reads of a job: the job row itself, or the job as one of its events
    recorded it (``jobs.selectors.JobFacts``, for the status of a past moment)."""

    @property
    def pk(self) -> Any: ...
    @property
    def kind(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def stage(self) -> str: ...
    @property
    def progress(self) -> float: ...
    @property
    def processed(self) -> int | None: ...
    @property
    def total(self) -> int | None: ...
    @property
    def attempt(self) -> int: ...
    @property
    def updated_at(self) -> datetime: ...
    @property
    def finished_at(self) -> datetime | None: ...
    @property
    def heartbeat_at(self) -> datetime | None: ...
    @property
    def error_code(self) -> str: ...
    @property
    def skipped_stages(self) -> list[str]: ...
    @property
    def cleanup_from(self) -> str: ...
    @property
    def cancel_requested_at(self) -> datetime | None: ...
    def state_word(self) -> str: ...


def state_label(job: JobState) -> str:
    """The words the pages show for the job's state (its kind's, else the neutral status label):
    refusals name a state as people read it, never as its code word."""
    try:
        return pipelines.get(job.kind).state_label(job.status, job.stage)
    except LookupError:
        return pipelines.status_label(job.status)


Condition = Callable[[JobState], "str | None"]


@dataclass(frozen=True)
class Action:
    """``allowed_from`` the statuses where the action may apply; ``refusals`` the reason per
    other status (``{state}`` is the label of the job's state, as the pages show it),
    ``otherwise`` for the rest;
    ``condition`` a further check returning a reason or ``None``; ``permission`` the operator
    power it needs in the admin (``None``: any member of the job's tenant, as a user);
    ``new_run`` marks an action that leaves this job as it is and starts a new job for its
    subject (so no transition of this job's state graph stands behind it)."""

    name: str
    allowed_from: frozenset[str]
    otherwise: str
    refusals: Mapping[str, str] = field(default_factory=dict)
    condition: Condition | None = None
    permission: str | None = None
    new_run: bool = False

    def refusal(self, job: JobState) -> str | None:
        """``None`` when the action applies to ``job`` now, otherwise the user-safe reason."""
        if job.status not in self.allowed_from:
            reason = self.refusals.get(job.status, self.otherwise)
            return reason.format(state=state_label(job))
        return self.condition(job) if self.condition else None


def _cleaned_up(job: JobState) -> str | None:
    if job.cleanup_from:
        return "The failed run is still being cleaned up. Try again in a moment."
    return None


def _input_kept(job: JobState) -> str | None:
    """The job kind's own answer to "is the input still there" (its ``input_gone`` hook)."""
    try:
        check = pipelines.get(job.kind).input_gone
    except LookupError:
        return None
    return check(job) if check is not None else None


def _retryable_cause(job: JobState) -> str | None:
    cause = get_cause(job.error_code)
    if not cause.user_retryable:
        return f"This failure ({cause.code}) cannot be fixed by retrying. {cause.user_message}"
    return _cleaned_up(job) or _input_kept(job)


def _cleaned_up_and_kept(job: JobState) -> str | None:
    return _cleaned_up(job) or _input_kept(job)


def _no_cancel_pending(job: JobState) -> str | None:
    if job.cancel_requested_at is not None:
        return "A cancel is pending: the reaper finishes it, there is nothing to take over."
    return None


_FINISHED: dict[str, str] = {
    S.READY: FINISHED_REASON,
    S.FAILED: FINISHED_REASON,
    S.CANCELLED: FINISHED_REASON,
}

CANCEL = Action(
    "cancel",
    frozenset({S.QUEUED, S.RUNNING}),
    otherwise="This job cannot be cancelled while it is “{state}”.",
    refusals={
        **_FINISHED,
        S.CANCEL_REQUESTED: "Cancellation was already requested.",
        S.STALLED: "The job is stalled; an operator must take it over or give it up.",
    },
    permission="operate",
)
RETRY = Action(
    "retry",
    frozenset({S.FAILED}),
    otherwise="Only a failed job can be retried; this one is “{state}”.",
    condition=_retryable_cause,
    permission="operate",
)
FORCE_RETRY = Action(
    "force_retry",
    frozenset({S.FAILED}),
    otherwise="Only a failed job can be retried; this one is “{state}”.",
    condition=_cleaned_up_and_kept,
    permission="force_retry",
)
TAKE_OVER = Action(
    "take_over",
    frozenset({S.STALLED}),
    otherwise="Only a stalled job can be taken over; this one is “{state}”.",
    condition=_no_cancel_pending,
    permission="takeover",
)
GIVE_UP = Action(
    "give_up",
    frozenset({S.STALLED}),
    otherwise="Only a stalled job can be given up; this one is “{state}”.",
    permission="operate",
)

_ACTIONS: dict[str, Action] = {}


def register_action(action: Action) -> Action:
    """Add (or replace, by name) an action of an app that owns a job kind."""
    _ACTIONS[action.name] = action
    return action


for _action in (CANCEL, RETRY, FORCE_RETRY, TAKE_OVER, GIVE_UP):
    register_action(_action)


def get_action(name: str) -> Action:
    return _ACTIONS[name]


def all_actions() -> list[Action]:
    return list(_ACTIONS.values())


def refusal(name: str, job: JobState) -> str | None:
    """Why ``name`` may not be taken on ``job`` now, or ``None`` when it may."""
    return _ACTIONS[name].refusal(job)


def allowed(name: str, job: JobState) -> bool:
    return refusal(name, job) is None


def check(name: str, job: JobState) -> None:
    """Raise :class:`TransitionRefused` with the table's reason when ``name`` does not apply."""
    reason = refusal(name, job)
    if reason is not None:
        raise TransitionRefused(reason, job_id=job.pk)
