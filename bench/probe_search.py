"""The indexing stage's probe on PostgreSQL in a large tenant: its full-text ranking through the
tenant's full-text index (what it did) against through the version's own entries (what it does).

A private database; a tenant of ``--entries`` index entries written in bulk (documents of 125
chunks of about 190 words, each holding the same ten words), then one small document through
the platform (hashing embedder) whose first chunk starts with those words. Then the stage's
``probe`` (the hybrid search for that version, as the indexing stage runs it) timed in
alternated rounds, the version's ranking once through ``backends.tenant_lexical`` (the old path,
for this benchmark only) and once through ``backends.version_lexical``; the ranking alone the
same two ways; medians, and the ranking query's ``EXPLAIN (ANALYZE, BUFFERS)`` each way.

    .venv/bin/python bench/probe_search.py [--entries N] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.common import say

SHARED = "harbour tide ledger lantern orchard falcon copper meadow granite signal"
CHUNKS = 125
WORDS, VOCABULARY = 180, 3_000


def fill(tenant: Any, entries: int) -> None:
    """``entries`` index entries in documents of ``CHUNKS``, written in bulk: each chunk the
    shared words, then ``WORDS`` drawn from a vocabulary of pseudo-words."""
    from tests.documents.helpers import bulk_published

    rng = random.Random(7)
    vocabulary = [f"w{i:04d}" for i in range(VOCABULARY)]
    bulk_published(
        tenant,
        entries // CHUNKS,
        CHUNKS,
        lambda n, o: f"{SHARED} {' '.join(rng.choices(vocabulary, k=WORDS))}",
    )


def child(entries: int, rounds: int) -> dict[str, Any]:
    from types import SimpleNamespace

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from bench.overhead import platform_pipeline
    from documents.models import Chunk, DocumentVersion, IndexEntry, Tenant
    from documents.retrieval import backends
    from documents.retrieval.text import query_tokens
    from documents.stages.index import PROBE_WORDS, probe

    common.migrate()
    tenant = Tenant.objects.create(slug="bench-probe", name="Bench")
    fill(tenant, entries)
    text = "\n\n".join(f"{SHARED} and the note number {n} of the small report. " * 12 for n in range(3))
    job = platform_pipeline(tenant, text.encode(), "small.txt")["job"]
    version = DocumentVersion.objects.get(job_id=job)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    ctx: Any = SimpleNamespace(input={"version_id": str(version.pk)}, shared={})
    new = backends.version_lexical

    def use(path: str) -> None:
        backends.version_lexical = new if path == "version" else backends.tenant_lexical  # type: ignore[assignment]

    scope = backends.Scope(tenant_id=tenant.pk, embedder="", version_id=version.pk)
    tokens = query_tokens(" ".join(Chunk.objects.filter(version=version).first().text.split()[:PROBE_WORDS]))

    def timed(path: str) -> float:
        use(path)
        start = time.perf_counter()
        probe(ctx)
        return time.perf_counter() - start

    def timed_ranking(path: str) -> float:
        start = time.perf_counter()
        (backends.tenant_lexical if path == "tenant" else new)(scope, tokens, backends.LEXICAL_CANDIDATES)
        return time.perf_counter() - start

    def timed_frequencies() -> float:
        start = time.perf_counter()
        backends._scoring(scope, tokens)
        return time.perf_counter() - start

    plans: dict[str, str] = {}
    for path in ("tenant", "version"):
        timed(path)  # warm-up
        use(path)
        with CaptureQueriesContext(connection) as queries:
            probe(ctx)
        [ranking] = [q["sql"] for q in queries.captured_queries if "ts_rank_cd" in q["sql"]]
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + ranking)
            plans[path] = "\n".join(row[0] for row in cursor.fetchall())
    times: dict[str, list[float]] = {
        p: [] for p in ("tenant", "version", "rank tenant", "rank version", "df")
    }
    for _ in range(rounds):
        for path in ("tenant", "version"):
            times[path].append(timed(path))
            times[f"rank {path}"].append(timed_ranking(path))
        times["df"].append(timed_frequencies())
    use("version")
    return {
        "entries": IndexEntry.objects.filter(tenant=tenant).count(),
        "version_entries": IndexEntry.objects.filter(version=version).count(),
        "times": times,
        "plans": plans,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    common.common_args(parser)
    parser.add_argument(
        "--entries", type=int, default=4_875, help="The tenant's bulk entries (default 4,875)."
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help="Alternated rounds (default 40, --quick 10)."
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child-env", help=argparse.SUPPRESS)
    args = parser.parse_args()
    rounds = args.rounds or (10 if args.quick else 40)
    if args.child:
        common.setup_django(json.loads(args.child_env))
        print("RESULT " + json.dumps(child(args.entries, rounds)), flush=True)
        return 0

    common.header(f"the indexing probe on PostgreSQL in a tenant of about {args.entries:,} entries")
    common.print_machine()
    with common.temp_dir("probe-search", args.keep) as tmp, common.bench_database("probe", args.keep) as db:
        env = common.base_env(
            settings="config.settings", database_url=db[1], var_dir=tmp, EMBEDDINGS_BACKEND="hashing"
        )
        command = [common.PYTHON, __file__, "--child", "--child-env", json.dumps(env)]
        command += ["--entries", str(args.entries), "--rounds", str(rounds)]
        result = common.child_result(command, env, timeout=1800, what="probe search")
    say(f"\n{result['entries']:,} entries in the tenant, {result['version_entries']} in the probed version")
    for path, what in (("tenant", "through the tenant's index (old)"), ("version", "the version's entries")):
        values = result["times"][path]
        say(
            f"\nprobe, ranking {what}: median {common.median(values) * 1000:.1f} ms over {len(values)} rounds"
        )
        say(result["plans"][path])
    for what, (old_key, new_key) in {
        "probe": ("tenant", "version"),
        "its full-text ranking alone": ("rank tenant", "rank version"),
    }.items():
        old, new = (common.median(result["times"][k]) for k in (old_key, new_key))
        say(f"\n{what}, median: {old * 1000:.1f} -> {new * 1000:.1f} ms ({new / old:.2f}x)")
    df = common.median(result["times"]["df"])
    say(f"of which the tenant's word frequencies and size (either way): {df * 1000:.1f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
