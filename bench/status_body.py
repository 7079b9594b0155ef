"""Benchmark: the in-process cost of one status body rendered through the output contract.

The status JSON of the API, of every SSE event and of the document page is ``JobStatusOut``
(``documents/api/output.py``). This measures, in this process on SQLite (no server, no query:
the job and version are loaded once), the milliseconds per call of

- ``job_view``: the job's facts the body shows (stage states, progress, allowed actions): the
  baseline, measured in the same run;
- ``job_status``: the whole body through the serializer (facts + rendering + two reversed URLs);
- ``job_status_as_of``: a past event's body, rendered from the event row (an SSE replay);

for a running job (progress known) and a ready one: 7 alternating rounds of 1,000 calls each,
the fastest round counted (the machine is shared; slower rounds measure the neighbours).
The serializer's own share is ``job_status`` minus ``job_view``.

Target (bench/README.md, "Status body"): the serializer adds <= 0.3 ms per body over its facts.

    .venv/bin/python bench/status_body.py [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
import timeit
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.common import say

TEXT = b"Status body notes.\n\nThe harbor was quiet and the amber falcon crossed the ridge.\n"


def per_call_ms(fns: dict[str, Any], calls: int, rounds: int) -> dict[str, float]:
    """Milliseconds per call of each of ``fns``, measured in alternating rounds (the machine's
    speed drifts between rounds; alternating exposes each to the same drift). The least
    disturbed round counts: on a shared machine the others measure the neighbours."""
    for fn in fns.values():
        fn()  # warm: caches filled once per process (routes, pipelines) are not what is measured
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(timeit.timeit(fn, number=calls) / calls * 1000)
    return {name: min(values) for name, values in times.items()}


def jobs() -> dict[str, Any]:
    """A running job (progress 130 of 200) and a ready one, made through the services."""
    from documents.models import DocumentVersion, Tenant
    from documents.services.accounts import user_create_in_tenant
    from documents.services.upload import document_upload
    from jobs.executor import run_job
    from jobs.services.worker import job_claim, job_report_progress

    user_create_in_tenant(username="bench", tenant_slug="bench")
    tenant = Tenant.objects.get(slug="bench")
    ready = document_upload(tenant=tenant, data=TEXT, filename="ready.txt")
    running = document_upload(tenant=tenant, data=TEXT + b"Another.\n", filename="running.txt")
    assert ready.job is not None and running.job is not None
    run_job(ready.job.pk, worker="bench")
    claim = job_claim(job_id=running.job.pk, worker="bench")
    assert claim is not None
    job_report_progress(job_id=claim.job_id, token=claim.token, done=130, total=200)
    return {
        name: DocumentVersion.objects.select_related("job").get(pk=result.version.pk)
        for name, result in (("running", running), ("ready", ready))
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    common.common_args(parser)
    args = parser.parse_args()
    calls, rounds = (300, 3) if args.quick else (1000, 7)

    common.header(f"status body in process: {rounds} rounds x {calls} calls, SQLite, no server")
    common.print_machine()
    say(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    report = common.Report("status_body")
    with common.temp_dir("status-body", args.keep) as tmp:
        common.setup_django(common.base_env(settings="bench.settings", database_url="", var_dir=tmp))
        common.migrate()
        from documents.api.output import job_status, job_status_as_of
        from jobs.models import JobEvent
        from jobs.selectors import job_view

        worst = 0.0
        for name, version in jobs().items():
            job = version.job
            event = JobEvent.objects.filter(job=job).order_by("id").first()  # a past event
            assert job is not None and event is not None
            measured = per_call_ms(
                {
                    "facts": lambda job=job: job_view(job),
                    "body": lambda version=version, job=job: job_status(version, job),
                    "past": lambda version=version, job=job, ev=event: job_status_as_of(version, job, ev),
                },
                calls,
                rounds,
            )
            facts, body, past = measured["facts"], measured["body"], measured["past"]
            added = body - facts
            worst = max(worst, added)
            report.figures[name] = {"job_view_ms": facts, "job_status_ms": body, "as_of_event_ms": past}
            say(
                f"{name:8} job_view (baseline) {facts:.3f} ms | job_status {body:.3f} ms "
                f"(+{added:.3f} ms) | a past event's body {past:.3f} ms"
            )
        say(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        report.check("serializer's share of a status body", worst, 0.3, higher_is_better=False, unit=" ms")
    report.print()
    report.dump(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
