"""``manage.py search_index``: build the vector indexes of a PostgreSQL + pgvector database
without blocking writes.

The embedding stage creates a missing index on its own, inside the worker and holding writes to
the vector table while it builds: instant for a new embedder, many minutes over a large table
(build times in bench/README.md, "Search at scale"). Run this before starting upgraded workers on a large
database (the index of an embedder changed shape, e.g. to half precision), or after an
interrupted build. On SQLite, or PostgreSQL without pgvector, there is nothing to build.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from documents.retrieval.index import search_index


class Command(BaseCommand):
    help = "Build missing vector indexes without blocking writes (an upgrade step on large databases)."

    def handle(self, *args: Any, **options: Any) -> None:
        for line in search_index().build():
            self.stdout.write(line)
