"""The job-kind registry: an app declares a kind of job as one bundle.

The engine knows nothing about what a stage does, nor the words a kind's users read. An app
registers a :class:`Pipeline` (in its ``AppConfig.ready``) holding everything that is the kind's
own: ordered stages with handlers, weights, deadlines, resumability and retry rules, the
combined state words (a running stage's name, its failure word), the failure causes with their
user messages, and hooks for publishing (inside the short transaction that sets ``ready``; it
may raise to refuse), for being told of a finished job in the transaction that finishes it
(``on_finish``), and for cleanup (after a cancel or a failure: remove the unpublished outputs of
the given stage and every later one; it must be idempotent). ``jobs/`` itself holds only generic
causes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobs import progress as progress_math
from jobs.errors import Cause, _, get_cause, register_cause
from jobs.retry import RetryRule

if TYPE_CHECKING:
    from jobs.context import StageContext
    from jobs.models import Job

Handler = Callable[["StageContext"], Any]
JobHook = Callable[["Job"], None]
CleanupHook = Callable[["Job", str], None]
# Why a finished job's input can no longer be processed (e.g. its stored bytes were freed), or None.
# It receives the job row or the job as an event recorded it (``jobs.rules.JobState``): read ``pk``.
InputCheck = Callable[[Any], "str | None"]


# What people read for a status when the job kind names no word of its own (English, marked for
# translation: :meth:`Pipeline.state_label` translates in the active language).
STATUS_LABELS: Mapping[str, str] = {
    "uploaded": _("Uploaded"),
    "queued": _("Queued"),
    "running": _("Running"),
    "cancel_requested": _("Stopping…"),
    "stalled": _("Stalled"),
    "ready": _("Ready"),
    "failed": _("Failed"),
    "cancelled": _("Cancelled"),
}


def status_label(status: str) -> str:
    """The neutral label of ``status`` in the active language (the status itself if unknown)."""
    from django.utils.translation import gettext

    label = STATUS_LABELS.get(status)
    return gettext(label) if label else status


@dataclass(frozen=True)
class Stage:
    """One step of a pipeline.

    ``deadline`` is the no-progress deadline in seconds: a stage that reports no progress (and
    saves no checkpoint) for that long is ended by its worker with a timeout. ``resumable``
    stages restart from their checkpoint, so a lost worker's job may be recovered
    automatically. ``retry`` overrides the taxonomy's default rule per cause code.
    ``pool`` names the workers a stage needs; consecutive stages of one pool run in one task.
    ``unit`` names what ``progress(done, total)`` counts ("items", "batches") for display.
    ``failed_word`` is the combined state word of a job that failed here (``<name>_failed`` when
    empty); while the stage runs, the word is its ``name``.
    """

    name: str
    handler: Handler
    weight: float
    label: str = ""
    deadline: float = 300.0
    resumable: bool = True
    retry: Mapping[str, RetryRule] = field(default_factory=dict)
    pool: str = "default"
    timeout_cause: str = "stage_timeout"
    unit: str = ""
    failed_word: str = ""

    def rule_for(self, cause_code: str) -> RetryRule:
        return self.retry.get(cause_code) or get_cause(cause_code).rule


@dataclass(frozen=True)
class Pipeline:
    kind: str
    stages: tuple[Stage, ...]
    publish: JobHook | None = None
    cleanup: CleanupHook | None = None
    label: str = ""
    causes: tuple[Cause, ...] = ()
    # Called inside the transaction that moves a job into ready, failed or cancelled, after its
    # compare-and-set: cheap writes only (e.g. an outbox row), no network call.
    on_finish: JobHook | None = None
    # Asked by the action table before a retry: a job whose input is gone cannot run again.
    input_gone: InputCheck | None = None
    # The words the kind's pages show for its combined state words (English, marked for
    # translation); words left out fall back to the stage's label while it runs, and to the
    # neutral status labels otherwise.
    state_labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [s.name for s in self.stages]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"pipeline {self.kind!r} needs distinct stage names")

    @property
    def first_stage(self) -> str:
        return self.stages[0].name

    @property
    def weights(self) -> list[float]:
        return [s.weight for s in self.stages]

    def index(self, stage_name: str) -> int:
        for i, stage in enumerate(self.stages):
            if stage.name == stage_name:
                return i
        raise KeyError(f"pipeline {self.kind!r} has no stage {stage_name!r}")

    def stage(self, stage_name: str) -> Stage:
        return self.stages[self.index(stage_name)]

    def next_stage(self, stage_name: str) -> Stage | None:
        i = self.index(stage_name) + 1
        return self.stages[i] if i < len(self.stages) else None

    def stages_to_pass(self, stage_name: str, skip: Collection[str]) -> tuple[Stage | None, list[str]]:
        """The stage a job moves to after ``stage_name`` when the stages named in ``skip`` that
        directly follow it are passed over (never the last stage: publishing stays where it is),
        and the names passed over."""
        nxt, passed = self.next_stage(stage_name), []
        while nxt is not None and nxt.name in skip and self.next_stage(nxt.name) is not None:
            passed.append(nxt.name)
            nxt = self.next_stage(nxt.name)
        return nxt, passed

    def state_word(self, status: str, stage_name: str) -> str:
        """The combined word users know: the stage while running, ``<stage>_failed`` words when
        failed at it, the status otherwise (``queued``, ``ready``, ``stalled`` ...)."""
        if status == "running":
            return stage_name
        if status == "failed":
            stage = next((s for s in self.stages if s.name == stage_name), None)
            return (stage.failed_word if stage else "") or f"{stage_name}_failed"
        return status

    def state_label(self, status: str, stage_name: str) -> str:
        """The words a person reads for the job's state (the pages' words, in the active
        language): what messages about the job say instead of its code word."""
        from django.utils.translation import gettext

        label = self.state_labels.get(self.state_word(status, stage_name))
        if label:
            return gettext(label)
        stage = next((s for s in self.stages if s.name == stage_name), None)
        if status == "running" and stage is not None and stage.label:
            return gettext(stage.label)
        return status_label(status)

    @property
    def state_words(self) -> list[str]:
        """Every combined word a job of this kind can show, in the order a person reads them."""
        failed = [self.state_word("failed", s.name) for s in self.stages]
        running = [s.name for s in self.stages]
        return ["uploaded", "queued", *running, "ready", *failed, "cancel_requested", "cancelled", "stalled"]

    def failed_stage(self, word: str) -> str | None:
        """The stage whose failure ``word`` names, if it is one."""
        return next((s.name for s in self.stages if self.state_word("failed", s.name) == word), None)

    def progress_at(self, stage_name: str, done: int | None = None, total: int | None = None) -> float:
        return progress_math.overall(self.weights, self.index(stage_name), done, total)


_REGISTRY: dict[str, Pipeline] = {}


def register(pipeline: Pipeline) -> Pipeline:
    """Register (or replace, for tests) the pipeline for ``pipeline.kind``, with its causes."""
    for cause in pipeline.causes:
        register_cause(cause)
    _REGISTRY[pipeline.kind] = pipeline
    return pipeline


def get(kind: str) -> Pipeline:
    try:
        return _REGISTRY[kind]
    except KeyError:
        raise LookupError(f"no pipeline registered for job kind {kind!r}") from None


def registered() -> dict[str, Pipeline]:
    return dict(_REGISTRY)
