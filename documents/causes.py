# long-module: the registry of every failure cause, each with its message, hint and retry rule,
# read as one table (the engine, the pages and the translations all look causes up here).
"""The failure causes of document ingestion, with their user messages and retry rules.

They are registered with the document pipeline (``documents/kinds/ingest.py``); the engine itself
knows only generic causes (``jobs/errors.py``). Messages are English and marked for
translation: the status JSON carries them as they are, the pages show them translated.
"""

from __future__ import annotations

from documents.engines import limits
from jobs.errors import Cause, UserAction
from jobs.errors import _ as _
from jobs.retry import RetryRule

_NO_RETRY = RetryRule(max_attempts=1)

UNSUPPORTED_INPUT = Cause(
    "unsupported_input",
    # No list of types here: they are the parser registry's (the upload refusal names them).
    _("This file cannot be processed in its format. Upload it in another format."),
    UserAction.REUPLOAD,
    transient=False,
    user_retryable=False,
    rule=_NO_RETRY,
)
CORRUPT_INPUT = Cause(
    "corrupt_input",
    _("The file is damaged and could not be read. Upload an intact copy."),
    UserAction.REUPLOAD,
    transient=False,
    user_retryable=False,
    rule=_NO_RETRY,
)
ENCRYPTED_INPUT = Cause(
    "encrypted_input",
    _("The file is password-protected. Remove the password and upload it again."),
    UserAction.REUPLOAD,
    transient=False,
    user_retryable=False,
    rule=_NO_RETRY,
)
EMPTY_INPUT = Cause(
    "empty_input",
    _("The file contains no readable text. Upload a file with content."),
    UserAction.REUPLOAD,
    transient=False,
    user_retryable=False,
    rule=_NO_RETRY,
)
PARSE_TIMEOUT = Cause(
    "parse_timeout",
    _("Reading the file took too long. It was retried; an operator has been told."),
    UserAction.CONTACT_OPERATOR,
    transient=True,
    user_retryable=True,
    rule=RetryRule(max_attempts=2, base_delay=5),
)
# The parsing sandbox's fork server ended during a call on two servers in a row (the OOM killer, an
# operator, a crash of its own: documents/sandbox/runner.py): the platform's fault, not the file's,
# so it waits and is retried like an unreachable service instead of counting toward resource_limit.
SANDBOX_FAILED = Cause(
    "sandbox_failed",
    _(
        "The parsing sandbox on the worker failed; nothing is wrong with the file. "
        "It will be retried automatically."
    ),
    UserAction.WAIT,
    transient=True,
    user_retryable=True,
    rule=RetryRule(max_attempts=3, base_delay=10, max_delay=120),
    alert_hour=3,
    operator_hint=_(
        "The parsing sandbox's server keeps ending on the workers: run `manage.py check --tag "
        "health` there, check that bubblewrap runs, and read the workers' log around the failures."
    ),
)
OCR_TIMEOUT = Cause(
    "ocr_timeout",
    _("Text recognition took too long. It was retried with smaller batches and another engine."),
    UserAction.RETRY,
    transient=True,
    user_retryable=True,
    rule=RetryRule(
        max_attempts=3,
        base_delay=2,
        adjustments=({"batch_size": "halve"}, {"ocr_engine": "alternative"}),
    ),
)
OCR_ENGINE_UNAVAILABLE = Cause(
    "ocr_engine_unavailable",
    _("Text recognition is temporarily unavailable. Processing will continue automatically."),
    UserAction.WAIT,
    transient=True,
    user_retryable=True,
    rule=RetryRule(max_attempts=6, base_delay=10, max_delay=300),
)
EMBEDDING_RATE_LIMITED = Cause(
    "embedding_rate_limited",
    _("The embedding service is busy. Processing will continue automatically."),
    UserAction.WAIT,
    transient=True,
    user_retryable=True,
    rule=RetryRule(max_attempts=10, base_delay=2, max_delay=300),
)
EMBEDDING_PROVIDER_DOWN = Cause(
    "embedding_provider_down",
    _("The embedding service is unreachable. Processing will continue automatically."),
    UserAction.WAIT,
    transient=True,
    user_retryable=True,
    rule=RetryRule(max_attempts=6, base_delay=5, max_delay=300),
)
EMBEDDING_AUTH = Cause(
    "embedding_auth",
    _("The embedding service refused our credentials. An operator must fix this."),
    UserAction.CONTACT_OPERATOR,
    transient=False,
    user_retryable=False,
    rule=_NO_RETRY,
)
# The workspace's embedder (its stored name) is not one this deployment can build: a model taken
# out of the installation, or settings it needs missing. Retrying cannot help until an operator
# acts; then the user (or the operator) processes the file again.
EMBEDDER_UNAVAILABLE = Cause(
    "embedder_unavailable",
    _(
        "This workspace's embedding model is not available on the server; nothing is wrong with "
        "the file. An operator has been told; process the file again once it is fixed."
    ),
    UserAction.CONTACT_OPERATOR,
    transient=False,
    user_retryable=True,
    rule=_NO_RETRY,
    alert_hour=1,
    operator_hint=_(
        "A workspace's embedder cannot be built here: install the model it names (the job's "
        "message says which) or set what its settings need, or re-index the workspace onto an "
        "embedder this deployment has (docs/upgrading.md); `manage.py check` names the settings."
    ),
)
INDEX_WRITE_FAILED = Cause(
    "index_write_failed",
    _("Saving to the search index failed. Processing will continue automatically."),
    UserAction.WAIT,
    transient=True,
    user_retryable=True,
    rule=RetryRule(max_attempts=5, base_delay=2, max_delay=60),
)
# A version embedded before a re-index switched its tenant (published later), or a switch that
# finds a published version without the new embedder's vectors: the retry embeds them.
VECTORS_MISSING = Cause(
    "vectors_missing",
    _("Some chunks still need vectors of the workspace's new embedder. Processing continues automatically."),
    UserAction.WAIT,
    transient=True,
    user_retryable=True,
    rule=RetryRule(max_attempts=5, base_delay=1, max_delay=30),
)
SUPERSEDED = Cause(
    "superseded",
    _("A newer version of this document was published first, so this version was not published."),
    UserAction.REUPLOAD,
    transient=False,
    user_retryable=False,
    rule=_NO_RETRY,
)
# The version's stored bytes were freed after the retention (documents/services/storage.py)
# while a retry of it was on its way: nothing to read, so a re-upload is the way.
INPUT_GONE = Cause(
    "input_gone",
    _("The uploaded file of this version was removed after its retention period. Upload the file again."),
    UserAction.REUPLOAD,
    transient=False,
    user_retryable=False,
    rule=_NO_RETRY,
)

# What one document may expand to while it is read (documents/engines/limits.py, enforced in the
# parsing sandbox): each limit fails with its own cause, and a re-upload of a smaller file is the way.
RESOURCE_LIMIT = Cause(
    limits.RESOURCE_LIMIT,
    _("Reading the file needed more memory than allowed. It was retried; an operator has been told."),
    UserAction.CONTACT_OPERATOR,
    transient=False,
    user_retryable=True,
    rule=RetryRule(max_attempts=2, base_delay=5),
)


def _limit(code: str, message: str) -> Cause:
    return Cause(code, message, UserAction.REUPLOAD, transient=False, user_retryable=False, rule=_NO_RETRY)


TOO_MANY_PAGES = _limit(
    limits.TOO_MANY_PAGES, _("The file has more pages than allowed. Split it and upload the parts.")
)
TEXT_TOO_LONG = _limit(
    limits.TEXT_TOO_LONG, _("The file has more text than allowed. Split it and upload the parts.")
)
NESTING_TOO_DEEP = _limit(
    limits.NESTING_TOO_DEEP, _("The page's markup is nested too deeply to read safely.")
)
LINE_TOO_LONG = _limit(
    limits.LINE_TOO_LONG,
    _("The file has a line too long to read safely. Add line breaks and upload it again."),
)
PAGE_TOO_LARGE = _limit(limits.PAGE_TOO_LARGE, _("A page is too large to render for text recognition."))
TOO_MANY_CHUNKS = _limit(
    limits.TOO_MANY_CHUNKS, _("The file has more text than allowed. Split it and upload the parts.")
)

ALL = (
    UNSUPPORTED_INPUT,
    CORRUPT_INPUT,
    ENCRYPTED_INPUT,
    EMPTY_INPUT,
    PARSE_TIMEOUT,
    SANDBOX_FAILED,
    OCR_TIMEOUT,
    OCR_ENGINE_UNAVAILABLE,
    EMBEDDING_RATE_LIMITED,
    EMBEDDING_PROVIDER_DOWN,
    EMBEDDING_AUTH,
    EMBEDDER_UNAVAILABLE,
    INDEX_WRITE_FAILED,
    VECTORS_MISSING,
    SUPERSEDED,
    INPUT_GONE,
    RESOURCE_LIMIT,
    TOO_MANY_PAGES,
    TEXT_TOO_LONG,
    NESTING_TOO_DEEP,
    LINE_TOO_LONG,
    PAGE_TOO_LARGE,
    TOO_MANY_CHUNKS,
)

# The re-index kind's own (not in ALL, the ingestion's causes).
# A re-index gated on an evaluation (documents/services/reindex_gate.py) whose new embedder
# answered the labelled queries worse: the switch is refused, the current embedder stays.
EVALUATION_WORSE = Cause(
    "evaluation_worse",
    _(
        "The new embedder answered the labelled queries worse than the current one, so the "
        "workspace keeps searching with its current embedder. The re-index links both evaluations."
    ),
    UserAction.CONTACT_OPERATOR,
    transient=False,
    user_retryable=False,
    rule=RetryRule(max_attempts=1),
)
TARGET_GONE = Cause(
    "reindex_superseded",
    _("This re-index was replaced by another one or its workspace is gone."),
    UserAction.CONTACT_OPERATOR,
    transient=False,
    user_retryable=False,
    rule=RetryRule(max_attempts=1),
)

# --- source syncs (documents/kinds/sync.py) ------------------------------------------------------

SOURCE_GONE = Cause(
    "source_gone",
    _("The source was removed."),
    UserAction.CONTACT_OPERATOR,
    transient=False,
    user_retryable=False,
    rule=RetryRule(max_attempts=1),
)
FOLDER_UNAVAILABLE = Cause(
    "folder_unavailable",
    _("The source's folder is missing or no longer allowed. Fix the folder or the source, then sync again."),
    UserAction.CONTACT_OPERATOR,
    transient=False,
    user_retryable=True,
    rule=RetryRule(max_attempts=1),
)
BUCKET_UNAVAILABLE = Cause(
    "bucket_unavailable",
    _(
        "The source's bucket could not be reached, or it refused the source's credentials. "
        "Check the endpoint, the bucket and the keys, then sync again."
    ),
    UserAction.CONTACT_OPERATOR,
    transient=False,
    user_retryable=True,
    rule=RetryRule(max_attempts=1),
)
WEB_UNAVAILABLE = Cause(
    "web_unavailable",
    _(
        "The source's web site could not be read: its start page, sitemap or robots.txt did not "
        "answer, or its address is no longer allowed. Nothing was changed; sync again later."
    ),
    UserAction.CONTACT_OPERATOR,
    transient=False,
    user_retryable=True,
    rule=RetryRule(max_attempts=1),
)
WEB_TOO_SLOW = Cause(
    "web_too_slow",
    _(
        "The source's web site asks for a pause between pages (its robots.txt Crawl-delay) too "
        "long to read them within the time one sync may take. Nothing was changed; lower the page "
        "limit or ask an operator."
    ),
    UserAction.CONTACT_OPERATOR,
    transient=False,
    user_retryable=True,
    rule=RetryRule(max_attempts=1),
)
SYNC_QUEUE_FULL = Cause(
    "sync_queue_full",
    _(
        "The workspace's queue is full of documents waiting to be processed. The sync continues "
        "on its own once they are."
    ),
    UserAction.WAIT,
    transient=True,
    user_retryable=True,
    # A large first sync waits for its own documents many times over: every wait frees the
    # worker (the documents need it) and the sync resumes from its checkpoint.
    rule=RetryRule(max_attempts=1000, base_delay=5, max_delay=60),
)
SYNC_RUNNING = Cause(
    "sync_running",
    _("Another sync of this source is running. Retry this one when it has finished."),
    UserAction.RETRY,
    transient=False,
    user_retryable=True,
    rule=RetryRule(max_attempts=1),
)
