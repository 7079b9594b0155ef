"""The document pipeline, registered with the job engine from outside it."""

from __future__ import annotations

from jobs import pipelines
from jobs.errors import Cause, UserAction, register_cause
from jobs.pipelines import Pipeline, Stage
from jobs.retry import RetryRule

KIND = "document.ingest"

SUPERSEDED = register_cause(
    Cause(
        "superseded",
        "A newer version of this document was published first, so this version was not published.",
        UserAction.REUPLOAD,
        transient=False,
        user_retryable=False,
        rule=RetryRule(max_attempts=1),
    )
)


def register() -> Pipeline:
    from documents.services.publish import version_cleanup, version_publish
    from documents.services.webhooks import job_finished
    from documents.stages import chunk, embed, index, ocr, parse

    return pipelines.register(
        Pipeline(
            kind=KIND,
            label="Document ingestion",
            stages=(
                Stage(
                    "parsing",
                    parse.run,
                    weight=20,
                    label="Parsing",
                    unit="pages",
                    deadline=120,
                    timeout_cause="parse_timeout",
                ),
                Stage(
                    "ocr",
                    ocr.run,
                    weight=25,
                    label="OCR",
                    unit="pages",
                    deadline=300,
                    timeout_cause="ocr_timeout",
                ),
                Stage("chunking", chunk.run, weight=15, label="Chunking", unit="chunks", deadline=120),
                Stage("embedding", embed.run, weight=25, label="Embedding", unit="batches", deadline=300),
                Stage("indexing", index.run, weight=15, label="Indexing", unit="batches", deadline=120),
            ),
            publish=version_publish,
            cleanup=version_cleanup,
            on_finish=job_finished,
        )
    )
