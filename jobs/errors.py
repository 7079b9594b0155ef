"""The one taxonomy of failure causes, and the exceptions the engine speaks in.

A cause carries everything the platform needs to react to a failure: whether it is transient,
the user-safe message and suggested action, whether a user may retry, and the default retry
rule. Operators see the full detail on the stage run; users only ever see ``user_message``
(English, marked with ``_`` so that makemessages collects it and pages show it translated).

The engine knows only generic causes (a lost worker, a timeout, an internal error, the
database, a quota). Each job kind registers its own with its pipeline (``Pipeline.causes``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from jobs.retry import RetryRule


def _(message: str) -> str:
    """Mark ``message`` for translation (makemessages collects ``_``) and return it unchanged:
    Django's ``gettext_noop`` would need settings, and embedders, parsers and sandboxed readers
    import this module without them."""
    return message


class UserAction(enum.StrEnum):
    """What the user can do about a failure."""

    REUPLOAD = "reupload"
    RETRY = "retry"
    WAIT = "wait"
    CONTACT_OPERATOR = "contact_operator"


@dataclass(frozen=True)
class Cause:
    code: str
    user_message: str
    action: UserAction
    transient: bool
    user_retryable: bool
    rule: RetryRule = field(default_factory=RetryRule)
    # Failed attempts in one hour from which the health page and /metrics raise an alert (0:
    # never), for causes that are the platform's fault rather than the input's; the hint says
    # where an operator looks first. ``JOBS_CAUSE_ALERTS`` overrides the threshold per cause.
    alert_hour: int = 0
    operator_hint: str = ""


_CAUSES: dict[str, Cause] = {}


def register_cause(cause: Cause) -> Cause:
    _CAUSES[cause.code] = cause
    return cause


def get_cause(code: str) -> Cause:
    """The cause for a code; unknown codes are treated as internal errors."""
    return _CAUSES.get(code, INTERNAL_ERROR)


def all_causes() -> list[Cause]:
    return list(_CAUSES.values())


_NO_RETRY = RetryRule(max_attempts=1)

WORKER_LOST = register_cause(
    Cause(
        "worker_lost",
        _("The worker processing this job stopped responding. An operator has been told."),
        UserAction.CONTACT_OPERATOR,
        transient=True,
        user_retryable=True,
        rule=RetryRule(max_attempts=3),
        alert_hour=3,
        operator_hint=_(
            "Workers stop in the middle of jobs: look for out-of-memory kills and restarts in the "
            "workers' logs and the service manager, and at the live workers on this page."
        ),
    )
)

STAGE_TIMEOUT = register_cause(
    Cause(
        "stage_timeout",
        _("This step made no progress for too long. It was retried; an operator has been told."),
        UserAction.CONTACT_OPERATOR,
        transient=True,
        user_retryable=True,
        rule=RetryRule(max_attempts=2, base_delay=5),
    )
)

INTERNAL_ERROR = register_cause(
    Cause(
        "internal_error",
        _("Something went wrong on our side. It was retried; an operator has been told."),
        UserAction.CONTACT_OPERATOR,
        transient=True,
        user_retryable=True,
        rule=RetryRule(max_attempts=3, base_delay=5, max_delay=120),
        alert_hour=3,
        operator_hint=_(
            "The workers' log holds the tracebacks; each failed attempt's error reference (the "
            "job's history) names its entry."
        ),
    )
)

DATABASE_UNAVAILABLE = register_cause(
    Cause(
        "database_unavailable",
        _("A temporary problem interrupted processing. It will continue automatically."),
        UserAction.WAIT,
        transient=True,
        user_retryable=True,
        rule=RetryRule(max_attempts=8, base_delay=2, max_delay=60),
    )
)

QUOTA_EXCEEDED = register_cause(
    Cause(
        "quota_exceeded",
        _("Your workspace has too many jobs waiting. Try again when some have finished."),
        UserAction.WAIT,
        transient=True,
        user_retryable=False,
        rule=_NO_RETRY,
    )
)


# --- exceptions -------------------------------------------------------------------------------


class JobError(Exception):
    """Base of the engine's exceptions."""


class JobConflict(JobError):
    """A compare-and-set matched no row: the job is not in the state the caller saw.

    ``code`` is stable for APIs (``conflict``, ``not_allowed``, ``lease_lost``); ``message`` is
    safe to show a user or operator.
    """

    def __init__(self, message: str, *, code: str = "conflict", job_id: object = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.job_id = job_id


class TransitionRefused(JobConflict):
    """The state graph (or a condition on it) does not allow this transition from here."""

    def __init__(self, message: str, *, job_id: object = None) -> None:
        super().__init__(message, code="not_allowed", job_id=job_id)


class LeaseLost(JobConflict):
    """A worker wrote with a token that is no longer the job's current lease."""

    def __init__(
        self, message: str = "The worker no longer holds this job.", *, job_id: object = None
    ) -> None:
        super().__init__(message, code="lease_lost", job_id=job_id)


class CancelRequested(JobError):
    """Raised at a safe point when the user asked to cancel: the handler unwinds."""


class WorkerDraining(JobError):
    """Raised at a safe point when the worker process is shutting down: the handler unwinds and
    the job is handed back at its checkpoint (not a failure)."""


class StageFailure(JobError):
    """A handler's classified failure: a cause code, operator detail and retry hints.

    ``retry_after`` is a provider's hint (HTTP Retry-After) in seconds.
    """

    def __init__(self, cause: str, detail: str = "", *, retry_after: float | None = None) -> None:
        super().__init__(detail or cause)
        self.cause = cause
        self.detail = detail
        self.retry_after = retry_after


class StageTimeout(StageFailure):
    """The stage made no progress for longer than its deadline."""

    def __init__(self, detail: str = "", *, cause: str = STAGE_TIMEOUT.code) -> None:
        super().__init__(cause, detail)
