"""What the web tier sends its database to take uploaded files: the statements of one
``POST /api/documents`` and of each further file of a ``POST /api/batches``, on SQLite and on
PostgreSQL, with this process's CPU a file (the web tier's Python and the test client's).

The requests go through Django's test client in this process (the tests' settings, a token of a
user of one tenant), each database in a child process of its own with its own private database;
nothing runs the jobs. Small distinct text files (no dedup). A batch's further file is the
difference between a batch of ``--files`` and a batch of two, over the files between them, so
the request's own statements (authentication, throttles, the batch's rows) are left out. Run it
in two trees to compare them; ``tests/documents/test_upload_statements.py`` holds the bounds.

    .venv/bin/python bench/web_statements.py [--files N] [--uploads N] [--backends sqlite,postgres]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.common import say

TEXT = "Notes from the harbour, file {n} of {tag}. The tide was high and the boats left at dawn.\n"


def measured(send: Any) -> tuple[Any, list[str], float]:
    """``send()``'s answer, the statements it sent and this process's CPU seconds for it."""
    from django.db import connection

    statements: list[str] = []

    def counted(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        statements.append(sql)
        return execute(sql, params, many, context)

    cpu = time.process_time()
    with connection.execute_wrapper(counted):
        answer = send()
    return answer, statements, time.process_time() - cpu


def child(files: int, uploads: int) -> dict[str, Any]:
    from django.core.files.uploadedfile import SimpleUploadedFile
    from rest_framework.test import APIClient

    from documents.services.accounts import user_create_in_tenant

    token = user_create_in_tenant(username="bench", tenant_slug="bench")
    client = APIClient(HTTP_HOST="localhost")
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")

    def text(tag: str, n: int) -> Any:
        return SimpleUploadedFile(f"{tag}-{n}.txt", TEXT.format(n=n, tag=tag).encode())

    def one(tag: str, n: int) -> Any:
        data = text(tag, n)
        return lambda: client.post("/api/documents/", {"file": data}, format="multipart")

    def batch(count: int, tag: str) -> Any:
        data = [text(tag, n) for n in range(count)]
        return lambda: client.post("/api/batches", {"files": data}, format="multipart")

    answer, _, _ = measured(one("warm", 0))  # the default collection is made once
    assert answer.status_code == 201, answer.content
    counts, cpus = [], []
    last: list[str] = []
    for n in range(uploads):
        answer, last, cpu = measured(one("upload", n))
        assert answer.status_code == 201, answer.content
        counts.append(len(last))
        cpus.append(cpu)
    two = measured(batch(2, "two"))
    many = measured(batch(files, "many"))
    for answer, _, _ in (two, many):
        assert answer.status_code == 201, answer.content
    further = files - 2
    repeats = Counter(sql[:90] for sql in last)
    return {
        "upload_statements": sorted(counts)[len(counts) // 2],
        "upload_cpu_ms": sorted(cpus)[len(cpus) // 2] * 1000,
        "batch_file_statements": (len(many[1]) - len(two[1])) / further,
        "batch_file_cpu_ms": (many[2] - two[2]) / further * 1000,
        "upload_repeated": {sql: n for sql, n in repeats.most_common() if n > 1},
    }


def run_backend(backend: str, files: int, uploads: int, keep: bool) -> dict[str, Any]:
    with common.temp_dir("webstmt", keep) as tmp:
        if backend == "postgres":
            with common.bench_database("webstmt", keep=keep) as (_, url):
                env = common.base_env(settings="tests.settings", database_url=url, var_dir=tmp)
                return spawn(env, files, uploads)
        env = common.base_env(settings="tests.settings", database_url="", var_dir=tmp)
        return spawn(env, files, uploads)


def spawn(env: dict[str, str], files: int, uploads: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", "--files", str(files), "--uploads", str(uploads)]
    return common.child_result(command, env, timeout=600, what="web statements")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    common.common_args(parser)
    parser.add_argument("--files", type=int, default=None, help="Files of the large batch (20, --quick 6).")
    parser.add_argument("--uploads", type=int, default=None, help="Single uploads (9, --quick 3).")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    files = max(3, args.files or (6 if args.quick else 20))
    uploads = max(1, args.uploads or (3 if args.quick else 9))
    if args.child:
        common.setup_django(dict(os.environ))
        common.migrate()
        print("RESULT " + json.dumps(child(files, uploads)), flush=True)
        return 0
    common.header(f"web statements: {uploads} single uploads, a batch of {files} files, in-process")
    common.print_machine()
    report = common.Report("web_statements")
    for backend in args.backends.split(","):
        figures = run_backend(backend, files, uploads, args.keep)
        report.figures[backend] = figures
        say(
            f"{backend}: an upload {figures['upload_statements']} statements "
            f"({figures['upload_cpu_ms']:.1f} ms CPU here); a further batch file "
            f"{figures['batch_file_statements']:.1f} ({figures['batch_file_cpu_ms']:.1f} ms)"
        )
        for sql, count in figures["upload_repeated"].items():
            say(f"    {count}x {sql}")
    report.print()
    report.dump(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
