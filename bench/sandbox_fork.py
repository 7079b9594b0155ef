"""The sandbox per document: a fresh child per input file against the fork server.

Small text files (a few KB each) go through ``sandbox_call("parse_pages", ...)`` one after another,
as the parse stage sends them, with ``DOCUMENTS_SANDBOX_FORK_SERVER`` off (a child per file: an
interpreter start and the parsers' imports each) and on (one server, a process forked per call),
in alternated rounds of ``--round`` files so that the machine's load hits both alike. Reported per
mode: CPU seconds per document (this process's, and every sandbox process tree's read from
``/proc`` just before the runner kills it, forked children included) and wall milliseconds per
document, and the CPU ratio.

    nice -n 10 .venv/bin/python bench/sandbox_fork.py [--docs 200] [--round 25]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.common import say


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    common.common_args(parser)
    parser.add_argument("--docs", type=int, default=None, help="Files per mode (default 200, --quick 50).")
    parser.add_argument("--round", type=int, default=25, help="Files per round; modes alternate by round.")
    args = parser.parse_args()
    docs = args.docs or (50 if args.quick else 200)
    common.header(f"sandbox per document: {docs} small text files, a child each vs the fork server")
    common.print_machine()
    with common.temp_dir("sandbox-fork", args.keep) as tmp:
        common.setup_django(common.base_env(settings="config.settings", database_url="", var_dir=tmp))
        from django.conf import settings

        from documents.sandbox import cpu as sandbox_cpu
        from documents.sandbox import runner as sandbox

        # A killed child's reaped descendants' CPU never reaches this process's os.times(): each
        # tree is read just before its kill (the server's includes every child it forked).
        sandbox_seconds = [0.0]
        kill = sandbox.Child.kill

        def counted_kill(child: sandbox.Child) -> None:
            sandbox_seconds[0] += sandbox_cpu.tree_cpu(child.interpreter_pid)
            kill(child)

        sandbox.Child.kill = counted_kill  # type: ignore[method-assign,assignment]

        say(f"walls: {sandbox.sandbox_walls()}")
        limits = sandbox.parse_limits().as_dict()
        files = []
        for number in range(docs):
            path = tmp / f"doc-{number:04d}.txt"
            words = " ".join(f"harbor{number}-{word}" for word in range(400))
            path.write_text(f"Document {number}\n\n{words}\n")
            files.append(path)

        def run(batch: list[Path], forked: bool) -> tuple[float, float]:
            settings.DOCUMENTS_SANDBOX_FORK_SERVER = forked
            sandbox.discard_idle()
            before, started, boxed = os.times(), time.perf_counter(), sandbox_seconds[0]
            for path in batch:
                answer = sandbox.sandbox_call("parse_pages", str(path), "text", 0, 50, limits, source=path)
                assert answer["pages"], path
            sandbox.discard_idle()  # the server (or the last child) reaped: its CPU counted
            after, wall = os.times(), time.perf_counter() - started
            cpu = sum(after[:2]) - sum(before[:2]) + sandbox_seconds[0] - boxed
            return cpu, wall

        totals = {False: [0.0, 0.0], True: [0.0, 0.0]}
        for start in range(0, docs, args.round):
            batch = files[start : start + args.round]
            order = (False, True) if (start // args.round) % 2 == 0 else (True, False)
            for forked in order:
                cpu, wall = run(batch, forked)
                totals[forked][0] += cpu
                totals[forked][1] += wall
        for forked, label in ((False, "a child per file"), (True, "fork server")):
            cpu, wall = totals[forked]
            say(f"{label}: {cpu / docs * 1000:.1f} ms CPU, {wall / docs * 1000:.1f} ms wall a document")
        ratio = totals[True][0] / totals[False][0]
        say(f"fork server / child per file: {ratio:.2f}x CPU, {totals[True][1] / totals[False][1]:.2f}x wall")
        say(f"load average: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
