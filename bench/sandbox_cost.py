"""The parsing sandbox's cost: the same text PDF parsed in this process and through the sandbox.

(a) ``documents.engines.parsing.parse`` in-process, every page; (b) the parse stage's way:
``sandbox_call("parse_pages", ...)`` in batches of ``DOCUMENTS_PARSE_BATCH_PAGES`` to a warm
child (the one a worker keeps), and (c) the first call of a worker, which starts its child.
Reported: the added milliseconds per page (b - a) / pages and the child start. Medians of runs.

    .venv/bin/python bench/sandbox_cost.py [--quick] [--pages N] [--runs N]
"""

from __future__ import annotations

import argparse
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
    parser.add_argument("--pages", type=int, default=None, help="PDF pages (default 300, --quick 100).")
    parser.add_argument("--runs", type=int, default=None, help="Timed runs (default 5, --quick 3).")
    args = parser.parse_args()
    pages = args.pages or (100 if args.quick else 300)
    runs = args.runs or (3 if args.quick else 5)
    common.header(f"sandbox cost: a {pages}-page text PDF parsed in-process and in the sandbox child")
    common.print_machine()
    with common.temp_dir("sandbox", args.keep) as tmp:
        common.setup_django(common.base_env(settings="config.settings", database_url="", var_dir=tmp))
        from django.conf import settings

        from documents import sandbox
        from documents.engines.parsing import parse
        from documents.engines.sniff import Kind

        pdf = tmp / "bench.pdf"
        pdf.write_bytes(common.text_pdf(pages))
        limits = sandbox.parse_limits().as_dict()
        batch = int(settings.DOCUMENTS_PARSE_BATCH_PAGES)

        def in_process() -> int:
            return sum(1 for _ in parse(pdf, Kind.PDF))

        def in_sandbox() -> int:
            done = 0
            while done < pages:
                answer = sandbox.sandbox_call("parse_pages", str(pdf), "pdf", done, batch, limits)
                done += len(answer["pages"])
            return done

        starts = []
        for _ in range(runs):
            sandbox.discard_idle()
            started = time.perf_counter()
            sandbox.sandbox_call("parse_pages", str(pdf), "pdf", 0, 1, limits)
            starts.append(time.perf_counter() - started)
        plain, boxed = [], []
        for _ in range(runs):  # alternated, so that drift hits both alike
            started = time.perf_counter()
            assert in_process() == pages
            plain.append(time.perf_counter() - started)
            started = time.perf_counter()
            assert in_sandbox() == pages
            boxed.append(time.perf_counter() - started)
        sandbox.discard_idle()
    a, b, c = common.median(plain), common.median(boxed), common.median(starts)
    say(f"in-process parse: {a:.3f} s ({a / pages * 1000:.2f} ms/page), median of {runs}")
    say(f"sandbox, warm child, batches of {batch}: {b:.3f} s ({b / pages * 1000:.2f} ms/page)")
    say(f"added per page: {(b - a) / pages * 1000:+.2f} ms ({b / a:.2f}x the parse alone)")
    say(f"first call of a worker (child start + imports + one page): {c * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
