"""What a stage handler gets: its input, checkpoint, progress, safe points, fenced writes and a
private temp directory."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings

from jobs import drain
from jobs.errors import CancelRequested, LeaseLost, StageTimeout, WorkerDraining
from jobs.scratch import scratch_root
from jobs.services import worker as worker_services

if TYPE_CHECKING:
    from jobs.models import Job
    from jobs.pipelines import Pipeline, Stage
    from jobs.services.worker import Claim


class StageContext:
    """Handed to a stage handler for one attempt of one stage.

    Thread-safe where it matters: the watchdog thread sets the flags that :meth:`check` reads.
    """

    def __init__(self, claim: Claim, pipeline: Pipeline, stage: Stage) -> None:
        self.claim = claim
        self.pipeline = pipeline
        self.stage = stage
        self.checkpoint: dict[str, Any] = dict(claim.job.checkpoint or {})
        self.hints: dict[str, Any] = dict(claim.job.hints or {})
        self.skipped = False
        self.skip_next: set[str] = set()
        self.cancel_requested = threading.Event()
        self.lease_lost = threading.Event()
        self.timed_out = threading.Event()
        self.handler_thread = threading.get_ident()
        self._last_progress = time.monotonic()
        self._last_progress_write = 0.0
        self._temp_dir: Path | None = None

    # --- what the handler reads ---------------------------------------------------------------

    @property
    def job(self) -> Job:
        return self.claim.job

    @property
    def job_id(self) -> Any:
        return self.claim.job_id

    @property
    def token(self) -> str:
        return self.claim.token

    @property
    def input(self) -> dict[str, Any]:
        return dict(self.claim.job.payload or {})

    @property
    def attempt(self) -> int:
        return self.claim.job.attempt

    @property
    def shared(self) -> dict[str, Any]:
        """What the handlers of the stages this task runs in a row read once and share (the
        subject's rows, say): kept from one stage to the next the same task continues, empty
        for a claim taken from the queue, so nothing here outlives the task."""
        return self.claim.shared

    @property
    def temp_dir(self) -> Path:
        """A private directory for this attempt, removed whatever happens."""
        if self._temp_dir is None:
            self._temp_dir = Path(tempfile.mkdtemp(prefix=f"job-{self.job_id}-", dir=scratch_root()))
        return self._temp_dir

    # --- what the handler does ----------------------------------------------------------------

    def touch(self) -> None:
        """Count as progress for the no-progress deadline."""
        self._last_progress = time.monotonic()

    def seconds_since_progress(self) -> float:
        return time.monotonic() - self._last_progress

    def check(self) -> None:
        """A safe point: raise if cancel was requested, the lease was lost, time ran out or the
        worker process is shutting down."""
        self._check_interrupts()
        if drain.draining():
            raise WorkerDraining()

    def _check_interrupts(self) -> None:
        if self.timed_out.is_set():
            raise StageTimeout("no progress within the stage deadline", cause=self.stage.timeout_cause)
        if self.lease_lost.is_set():
            raise LeaseLost(job_id=self.job_id)
        if self.cancel_requested.is_set():
            raise CancelRequested()

    def progress(self, done: int, total: int | None = None) -> None:
        """Report ``done`` of ``total`` units (items, batches) of this stage.

        Writes are throttled; the last unit (``done == total``) is always written.
        """
        self.touch()
        if self._report_due(done, total):
            self._report(done, total)

    @contextmanager
    def write(
        self, checkpoint: dict[str, Any] | None = None, *, done: int | None = None, total: int | None = None
    ) -> Iterator[None]:
        """A fenced transaction for a batch of outputs; ``checkpoint`` commits with them, and so
        does the progress ``done`` of ``total`` when given (throttled as :meth:`progress`). The
        checkpoint and progress are one UPDATE under the lease, the transaction's first
        statement: it is also the lease check and takes the job row's lock before any output.

        Output rows and the checkpoint that says they exist commit together, so a resume never
        skips work that was not saved nor redoes work that was. A worker that is shutting down
        still commits the batch it has done, then stops here (the checkpoint is the drain's
        safe point: nothing done is thrown away).
        """
        self._check_interrupts()
        now = time.monotonic()
        report = (
            self._report_of(now, done, total) if done is not None and self._report_due(done, total) else None
        )
        with worker_services.fenced(
            job_id=self.job_id, token=self.token, checkpoint=checkpoint, report=report
        ) as recorded:
            yield
        if recorded is not None:
            self._reported(now, recorded)
        if checkpoint is not None:
            self._saved(checkpoint)
        self.touch()
        if checkpoint is not None and drain.draining():
            raise WorkerDraining()

    def _report_due(self, done: int, total: int | None) -> bool:
        final = total is not None and done >= total
        return final or time.monotonic() - self._last_progress_write >= settings.JOBS_PROGRESS_WRITE_SECONDS

    def _report_of(self, now: float, done: int, total: int | None) -> worker_services.Report:
        return worker_services.Report(
            done=done,
            total=total,
            stage=(self.pipeline.kind, self.stage.name),
            # This worker appended the last progress event itself (in this stage or an earlier
            # one of the same task): none is due before then.
            event=now - self.claim.last_event >= settings.JOBS_PROGRESS_EVENT_SECONDS,
        )

    def _report(self, done: int, total: int | None) -> None:
        now = time.monotonic()
        report = self._report_of(now, done, total)
        self._reported(
            now, worker_services.job_report_progress(job_id=self.job_id, token=self.token, **report._asdict())
        )

    def _reported(self, now: float, recorded: worker_services.Recorded) -> None:
        self._last_progress_write = now
        if recorded.event:
            self.claim.last_event = now

    def _saved(self, checkpoint: dict[str, Any]) -> None:
        self.checkpoint = dict(checkpoint)

    def skip(self) -> None:
        """Mark this stage as skipped (nothing to do); it counts as done for progress."""
        self.skipped = True

    def skip_following(self, *names: str) -> None:
        """Pass over the named stages that directly follow this one: this handler found they have
        nothing to do. The job moves past them in the transition that ends this stage, so they
        never show as running; they count as skipped."""
        self.skip_next.update(names)

    def close(self) -> None:
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None
