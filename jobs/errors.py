"""The one taxonomy of failure causes, and the exceptions the engine speaks in.

A cause carries everything the platform needs to react to a failure: whether it is transient,
the user-safe message and suggested action, whether a user may retry, and the default retry
rule. Operators see the full detail on the stage run; users only ever see ``user_message``.
Apps may register more causes with :func:`register_cause`; the engine knows these defaults.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from jobs.retry import RetryRule


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

UNSUPPORTED_INPUT = register_cause(
    Cause(
        "unsupported_input",
        "This file type is not supported. Upload a PDF, DOCX, HTML, Markdown, text or image file.",
        UserAction.REUPLOAD,
        transient=False,
        user_retryable=False,
        rule=_NO_RETRY,
    )
)
CORRUPT_INPUT = register_cause(
    Cause(
        "corrupt_input",
        "The file is damaged and could not be read. Upload an intact copy.",
        UserAction.REUPLOAD,
        transient=False,
        user_retryable=False,
        rule=_NO_RETRY,
    )
)
ENCRYPTED_INPUT = register_cause(
    Cause(
        "encrypted_input",
        "The file is password-protected. Remove the password and upload it again.",
        UserAction.REUPLOAD,
        transient=False,
        user_retryable=False,
        rule=_NO_RETRY,
    )
)
EMPTY_INPUT = register_cause(
    Cause(
        "empty_input",
        "The file contains no readable text. Upload a file with content.",
        UserAction.REUPLOAD,
        transient=False,
        user_retryable=False,
        rule=_NO_RETRY,
    )
)
PARSE_TIMEOUT = register_cause(
    Cause(
        "parse_timeout",
        "Reading the file took too long. It was retried; an operator has been told.",
        UserAction.CONTACT_OPERATOR,
        transient=True,
        user_retryable=True,
        rule=RetryRule(max_attempts=2, base_delay=5),
    )
)
OCR_TIMEOUT = register_cause(
    Cause(
        "ocr_timeout",
        "Text recognition took too long. It was retried with smaller batches and another engine.",
        UserAction.RETRY,
        transient=True,
        user_retryable=True,
        rule=RetryRule(
            max_attempts=3,
            base_delay=2,
            adjustments=({"batch_size": "halve"}, {"ocr_engine": "alternative"}),
        ),
    )
)
OCR_ENGINE_UNAVAILABLE = register_cause(
    Cause(
        "ocr_engine_unavailable",
        "Text recognition is temporarily unavailable. Processing will continue automatically.",
        UserAction.WAIT,
        transient=True,
        user_retryable=True,
        rule=RetryRule(max_attempts=6, base_delay=10, max_delay=300),
    )
)
EMBEDDING_RATE_LIMITED = register_cause(
    Cause(
        "embedding_rate_limited",
        "The embedding service is busy. Processing will continue automatically.",
        UserAction.WAIT,
        transient=True,
        user_retryable=True,
        rule=RetryRule(max_attempts=10, base_delay=2, max_delay=300),
    )
)
EMBEDDING_PROVIDER_DOWN = register_cause(
    Cause(
        "embedding_provider_down",
        "The embedding service is unreachable. Processing will continue automatically.",
        UserAction.WAIT,
        transient=True,
        user_retryable=True,
        rule=RetryRule(max_attempts=6, base_delay=5, max_delay=300),
    )
)
EMBEDDING_AUTH = register_cause(
    Cause(
        "embedding_auth",
        "The embedding service refused our credentials. An operator must fix this.",
        UserAction.CONTACT_OPERATOR,
        transient=False,
        user_retryable=False,
        rule=_NO_RETRY,
    )
)
INDEX_WRITE_FAILED = register_cause(
    Cause(
        "index_write_failed",
        "Saving to the search index failed. Processing will continue automatically.",
        UserAction.WAIT,
        transient=True,
        user_retryable=True,
        rule=RetryRule(max_attempts=5, base_delay=2, max_delay=60),
    )
)
WORKER_LOST = register_cause(
    Cause(
        "worker_lost",
        "The worker processing this file stopped responding. An operator has been told.",
        UserAction.CONTACT_OPERATOR,
        transient=True,
        user_retryable=True,
        rule=RetryRule(max_attempts=3),
    )
)
STAGE_TIMEOUT = register_cause(
    Cause(
        "stage_timeout",
        "This step made no progress for too long. It was retried; an operator has been told.",
        UserAction.CONTACT_OPERATOR,
        transient=True,
        user_retryable=True,
        rule=RetryRule(max_attempts=2, base_delay=5),
    )
)
INTERNAL_ERROR = register_cause(
    Cause(
        "internal_error",
        "Something went wrong on our side. It was retried; an operator has been told.",
        UserAction.CONTACT_OPERATOR,
        transient=True,
        user_retryable=True,
        rule=RetryRule(max_attempts=3, base_delay=5, max_delay=120),
    )
)
DATABASE_UNAVAILABLE = register_cause(
    Cause(
        "database_unavailable",
        "A temporary problem interrupted processing. It will continue automatically.",
        UserAction.WAIT,
        transient=True,
        user_retryable=True,
        rule=RetryRule(max_attempts=8, base_delay=2, max_delay=60),
    )
)
QUOTA_EXCEEDED = register_cause(
    Cause(
        "quota_exceeded",
        "Your workspace has too many documents waiting. Try again when some have finished.",
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
