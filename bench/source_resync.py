"""Benchmark: a bucket source's re-sync against its first sync (bench/README.md, "Source re-sync").

A real SeaweedFS bucket holds N small text objects (default 10,000; --quick 1,000). A bucket
source of a PostgreSQL workspace syncs it once: the sync job, then every ingestion job it made
run to ``ready`` (the first sync's time includes the documents reaching ``ready``). Then 1 % of
the objects get new text and the source syncs again, the same way. Both run in one process, the
sync job's stages and each ingestion job through ``jobs.executor.run_job`` (the worker's own
code path, without a cluster's scheduling), with the hashing embedder (a model would measure the
embedder, not the platform).

Figures per sync: time (sync job, ingestion, total), objects listed, the sync's counts, ingestion
jobs and versions made, chunks embedded (vectors written). Verdict: re-sync time <= 5 % of the
first sync's.

    .venv/bin/python bench/source_resync.py [--quick] [--objects N] [--json FILE] [--keep]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.common import say

TARGET_RATIO = 0.05
CHANGED_SHARE = 0.01
WORDS = [
    "harbour",
    "lantern",
    "compass",
    "saffron",
    "juniper",
    "quokka",
    "walrus",
    "apiary",
    "terrace",
    "glacier",
    "comet",
    "tram",
]


def text_of(n: int, edition: int) -> bytes:
    own = " ".join(f"{WORDS[(n + k) % len(WORDS)]}{n % 97}" for k in range(6))
    return (
        f"Record {n}, edition {edition}: the {own} register.\n\n"
        f"Item {n} of the archive notes that the board met on day {n % 365} (edition {edition}).\n"
    ).encode()


def put_all(client: Any, bucket: str, keys: list[int], edition: int) -> None:
    def put(n: int) -> None:
        client.put_object(Bucket=bucket, Key=f"archive/{n:06d}.txt", Body=text_of(n, edition))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, keys))


def child(objects: int, tmp: Path) -> dict[str, Any]:
    common.migrate()
    from django.conf import settings
    from django.utils import timezone

    from documents.kinds import INGEST
    from documents.models import ChunkVector, DocumentVersion, Tenant
    from documents.services.collections import default_collection
    from documents.sources.models import SourceSync
    from documents.sources.services import source_create, sync_start
    from jobs.executor import run_job
    from jobs.models import Job, Status
    from tests.seaweed import seaweed_server

    settings.SOURCES_S3_ALLOW_HTTP = True
    settings.SOURCES_S3_ALLOW_PRIVATE = True
    results: dict[str, Any] = {"objects": objects}
    with seaweed_server(tmp / "seaweed") as server:
        bucket = server.create_bucket("bench-archive")
        started = time.perf_counter()
        put_all(server.client(), bucket, list(range(objects)), 1)
        results["upload_objects_s"] = time.perf_counter() - started
        # The default queue (200 waiting jobs) would refuse most of a first sync's items (a per-item
        # queue_full failure, retried by the next sync): the benchmark's workspace may queue them all.
        tenant = Tenant.objects.create(slug="bench", name="Bench", max_queued_jobs=objects * 2 + 100)
        source = source_create(
            tenant=tenant,
            collection=default_collection(tenant),
            name="Archive",
            kind="s3",
            config={"endpoint": server.endpoint, "bucket": bucket, "prefix": "archive/"},
            credentials={"access_key_id": server.access_key, "secret_access_key": server.secret_key},
        )

        def one_sync(label: str) -> dict[str, Any]:
            jobs0 = Job.objects.filter(kind=INGEST).count()
            versions0 = DocumentVersion.objects.count()
            since = timezone.now()
            start = time.perf_counter()
            job_id = sync_start(source=source).sync.job_id
            while run_job(job_id) != "not claimed":
                pass
            synced = time.perf_counter()
            ingest = list(
                Job.objects.filter(kind=INGEST, status=Status.QUEUED)
                .order_by("created_at")
                .values_list("pk", flat=True)
            )
            for pk in ingest:
                while run_job(pk) != "not claimed":
                    pass
            end = time.perf_counter()
            sync_row = SourceSync.objects.get(job_id=job_id)
            not_ready = Job.objects.filter(kind=INGEST).exclude(status=Status.READY).count()
            figures = {
                "sync_job_s": synced - start,
                "ingest_s": end - synced,
                "total_s": end - start,
                "status": Job.objects.get(pk=job_id).status,
                "counts": sync_row.counts,
                "listed": len(sync_row.listing),
                "ingest_jobs": Job.objects.filter(kind=INGEST).count() - jobs0,
                "versions": DocumentVersion.objects.count() - versions0,
                # Vectors of the versions this sync made (a superseded version's are removed once
                # the new one publishes, so a count of all vectors would hide them).
                "chunks_embedded": ChunkVector.objects.filter(version__created_at__gte=since).count(),
                "not_ready": not_ready,
            }
            say(f"[{label}] {json.dumps(figures)}")
            return figures

        results["first"] = one_sync("first")
        changed = list(range(0, objects, round(1 / CHANGED_SHARE)))
        put_all(server.client(), bucket, changed, 2)
        results["changed_objects"] = len(changed)
        results["resync"] = one_sync("re-sync")
    return results


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    common.common_args(parser)
    parser.add_argument("--objects", type=int, default=None, help="Objects (default 10000, --quick 1000).")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child-env", help=argparse.SUPPRESS)
    parser.add_argument("--tmp", help=argparse.SUPPRESS)
    args = parser.parse_args()
    objects = args.objects or (1000 if args.quick else 10000)
    if args.child:
        common.setup_django(json.loads(args.child_env))
        print("RESULT " + json.dumps(child(objects, Path(args.tmp)), default=str), flush=True)
        return 0
    common.header(f"source re-sync: a bucket of {objects} objects, then 1 % changed")
    common.print_machine()
    report = common.Report("source_resync")
    with (
        common.temp_dir("resync", args.keep) as tmp,
        common.bench_database("resync", keep=args.keep) as (_, url),
    ):
        env = common.base_env(
            settings="config.settings", database_url=url, var_dir=tmp / "var", EMBEDDINGS_BACKEND="hashing"
        )
        command = [common.PYTHON, __file__, "--child", "--objects", str(objects)]
        command += ["--child-env", json.dumps(env), "--tmp", str(tmp)]
        result = common.child_result(command, env, timeout=4 * 3600, what="source_resync")
    first, again = result["first"], result["resync"]
    for label, figures in (("first sync", first), ("re-sync", again)):
        say(
            f"\n{label}: {figures['total_s']:.1f} s (sync job {figures['sync_job_s']:.2f} s, "
            f"ingestion to ready {figures['ingest_s']:.1f} s); listed {figures['listed']}, "
            f"counts {figures['counts']}; ingestion jobs {figures['ingest_jobs']}, "
            f"versions {figures['versions']}, chunks embedded {figures['chunks_embedded']}"
        )
        if figures["status"] != "ready" or figures["not_ready"]:
            raise SystemExit(f"{label}: the sync or its documents did not reach ready")
    ratio = again["total_s"] / first["total_s"]
    say(f"\nchanged objects: {result['changed_objects']}; re-sync / first sync: {ratio * 100:.2f} %")
    report.figures = {**result, "ratio": ratio}
    report.check(
        "re-sync time / first sync time", ratio * 100, TARGET_RATIO * 100, higher_is_better=False, unit=" %"
    )
    report.print()
    report.dump(args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
