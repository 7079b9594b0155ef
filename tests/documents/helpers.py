"""Shared helpers for the ingestion tests: tenants, uploads, running jobs, pausing a stage, and a
real OpenAI-compatible embeddings server.

State is created through the services (``document_upload``, ``run_job``, ``job_cancel``); only a
tenant, which has no service of its own, is created directly.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from django.db import connection
from django.utils import timezone

from documents.bulk_insert import insert_rows
from documents.embedders import configured_embedder
from documents.embedders.hashing import HashingEmbedder
from documents.kinds import INGEST as KIND
from documents.models import Chunk, ChunkVector, Document, DocumentVersion, IndexEntry, Page, Tenant
from documents.retrieval.text import search_text
from documents.search import SearchHit, search
from documents.services.collections import default_collection
from documents.services.upload import UploadResult, document_upload
from documents.stages.index import ENTRY_FIELDS
from jobs import pipelines
from jobs.context import StageContext
from jobs.executor import run_job
from jobs.models import Job
from tests.conftest import serve_in_thread

# --- state through the services -----------------------------------------------------------------


def make_tenant(slug: str = "acme", **fields: Any) -> Tenant:
    return Tenant.objects.create(slug=slug, name=slug.title(), **fields)


def upload(
    tenant: Tenant, data: bytes, filename: str, *, document: Document | None = None, title: str = ""
) -> UploadResult:
    return document_upload(tenant=tenant, data=data, filename=filename, title=title, document=document)


def bulk_published(tenant: Tenant, documents: int, chunks: int, text: Callable[[int, int], str]) -> None:
    """``documents`` published documents of ``chunks`` index entries each, written in bulk past
    the pipeline (a large tenant in seconds; no vectors): chunk ``o`` of document ``n`` says
    ``text(n, o)``. The rows are what the indexing stage writes (``ENTRY_FIELDS``)."""
    collection = default_collection(tenant)
    made = Document.objects.bulk_create(
        Document(tenant=tenant, collection=collection, title=f"log {d}") for d in range(documents)
    )
    versions = DocumentVersion.objects.bulk_create(
        DocumentVersion(
            document=d, number=1, file=f"x/{d.pk}.txt", original_name="log.txt", kind="text",
            content_type="text/plain", size=1, sha256="0" * 64, entries=chunks,
        )
        for d in made
    )  # fmt: skip
    for document, version in zip(made, versions, strict=True):
        document.published_version = version
    Document.objects.bulk_update(made, ["published_version"])
    rows = Chunk.objects.bulk_create(
        Chunk(version=v, ordinal=o, text=text(n, o), page_start=1, page_end=1)
        for n, v in enumerate(versions)
        for o in range(chunks)
    )
    embedder = configured_embedder().name
    entries = [
        (tenant.pk, c.version.document_id, c.version.pk, c.pk, c.ordinal, 0, embedder, search_text(c.text))
        for c in rows
    ]
    insert_rows(IndexEntry, ENTRY_FIELDS, entries)


def reload_job(job_or_id: Job | Any) -> Job:
    return Job.objects.get(pk=job_or_id.pk if isinstance(job_or_id, Job) else job_or_id)


def job_of(version: DocumentVersion) -> Job:
    version = DocumentVersion.objects.get(pk=version.pk)
    assert version.job_id is not None
    return Job.objects.get(pk=version.job_id)


def run_until_idle(job_id: Any, *, limit: int = 20) -> Job:
    """Run the job in this process until nothing is claimable (finished, or backing off)."""
    for _ in range(limit):
        if run_job(job_id) == "not claimed":
            return Job.objects.get(pk=job_id)
    raise AssertionError(f"job {job_id} was still claimable after {limit} runs")


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def output_counts(version: DocumentVersion) -> dict[str, int]:
    """The version's rows in every output table, by table."""
    return {
        "pages": Page.objects.filter(version_id=version.pk).count(),
        "chunks": Chunk.objects.filter(version_id=version.pk).count(),
        "vectors": ChunkVector.objects.filter(version_id=version.pk).count(),
        "index": IndexEntry.objects.filter(version_id=version.pk).count(),
    }


NO_OUTPUTS = {"pages": 0, "chunks": 0, "vectors": 0, "index": 0}


def output_ids(version: DocumentVersion) -> dict[str, set[int]]:
    """The primary keys of the version's output rows, to prove rows were left untouched."""
    return {
        "pages": set(Page.objects.filter(version_id=version.pk).values_list("pk", flat=True)),
        "chunks": set(Chunk.objects.filter(version_id=version.pk).values_list("pk", flat=True)),
        "vectors": set(ChunkVector.objects.filter(version_id=version.pk).values_list("pk", flat=True)),
        "index": set(IndexEntry.objects.filter(version_id=version.pk).values_list("pk", flat=True)),
    }


def hits_for(tenant: Tenant, query: str, k: int = 10) -> list[SearchHit]:
    return search(Tenant.objects.get(pk=tenant.pk), query, k=k)


def found_versions(tenant: Tenant, query: str, k: int = 10) -> set[Any]:
    return {hit.version_id for hit in hits_for(tenant, query, k)}


def top_hit(tenant: Tenant, query: str) -> SearchHit | None:
    hits = hits_for(tenant, query, k=1)
    return hits[0] if hits else None


# --- running a job in another thread, and pausing it at a stage ----------------------------------


class JobThread(threading.Thread):
    """Runs a job to idle in its own thread (and database connection), like a worker would."""

    def __init__(self, job_id: Any) -> None:
        super().__init__(name=f"job-{job_id}", daemon=True)
        self.job_id = job_id
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            run_until_idle(self.job_id)
        except BaseException as exc:
            self.error = exc
        finally:
            connection.close()

    def finish(self, timeout: float = 60) -> None:
        self.join(timeout)
        assert not self.is_alive(), f"job thread {self.job_id} did not finish"
        if self.error is not None:
            raise self.error


@dataclass
class Gate:
    """Holds a stage's worker right after the stage's real handler did its work.

    ``reached`` is set when the handler returned (its outputs are committed); the worker then
    waits for ``release`` before the engine records the stage's outcome.
    """

    reached: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def wait_reached(self, timeout: float = 60) -> None:
        assert self.reached.wait(timeout), "the gated stage was never reached"


@contextmanager
def paused_after(stage_name: str) -> Iterator[Gate]:
    """Register a variant of the document pipeline whose ``stage_name`` handler is the real one
    followed by a :class:`Gate`; the original pipeline is restored on exit."""
    original = pipelines.get(KIND)
    stage = original.stage(stage_name)
    gate = Gate()

    def gated(ctx: StageContext) -> None:
        stage.handler(ctx)
        gate.reached.set()
        if not gate.release.wait(60):
            raise AssertionError("the test never released the gate")

    stages = tuple(replace(s, handler=gated) if s.name == stage_name else s for s in original.stages)
    pipelines.register(replace(original, stages=stages))
    try:
        yield gate
    finally:
        gate.release.set()
        pipelines.register(original)


# --- a real OpenAI-compatible embeddings server ------------------------------------------------

API_KEY = "sk-test-Secr3t-0123456789abcdef"


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str] = field(default_factory=dict)


OK = Reply(200)


@dataclass
class Received:
    at: datetime
    path: str
    authorization: str
    model: str
    inputs: list[str]
    status: int = 0
    answered_at: datetime | None = None


class EmbeddingsServer(ThreadingHTTPServer):
    """``POST /v1/embeddings`` as OpenAI answers it, scripted: the queued replies go out in order,
    then ``default`` for every later request. Vectors come from a hashing embedder on the server,
    so they are deterministic and searchable."""

    daemon_threads = True

    def __init__(
        self, script: list[Reply] | None = None, *, default: Reply = OK, dimension: int = 256
    ) -> None:
        super().__init__(("127.0.0.1", 0), _EmbeddingsHandler)
        self.lock = threading.Lock()
        self.script: deque[Reply] = deque(script or [])
        self.default = default
        self.embedder = HashingEmbedder(dimension)
        self.received: list[Received] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def next_reply(self, request: Received) -> Reply:
        with self.lock:
            self.received.append(request)
            return self.script.popleft() if self.script else self.default


class _EmbeddingsHandler(BaseHTTPRequestHandler):
    server: EmbeddingsServer

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        request = Received(
            at=timezone.now(),
            path=self.path,
            authorization=self.headers.get("Authorization", ""),
            model=str(body.get("model", "")),
            inputs=list(body.get("input", [])),
        )
        reply = self.server.next_reply(request)
        if self.path != "/v1/embeddings":
            reply = Reply(404)
        if reply.status == 200:
            vectors = self.server.embedder.embed(request.inputs)
            payload: dict[str, Any] = {
                "object": "list",
                "model": request.model,
                "data": [
                    {"object": "embedding", "index": i, "embedding": [float(x) for x in vector]}
                    for i, vector in enumerate(vectors)
                ],
                "usage": {"prompt_tokens": 0, "total_tokens": 0},
            }
        else:
            # Like some proxies, echo the credential back in the error body.
            payload = {"error": {"message": f"refused {request.authorization}", "code": reply.status}}
        data = json.dumps(payload).encode()
        request.status = reply.status
        request.answered_at = timezone.now()
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def embeddings_server(
    script: list[Reply] | None = None, *, default: Reply = OK, dimension: int = 256
) -> Iterator[EmbeddingsServer]:
    server = EmbeddingsServer(script, default=default, dimension=dimension)
    thread = serve_in_thread(server)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def use_http_embeddings(settings: Any, server: EmbeddingsServer) -> None:
    """Point the platform's configured embedder at ``server`` (the caller clears the cache)."""
    settings.EMBEDDINGS_BACKEND = "http"
    settings.EMBEDDINGS_HTTP_BASE_URL = server.base_url
    settings.EMBEDDINGS_HTTP_MODEL = "test-embed-1"
    settings.EMBEDDINGS_HTTP_API_KEY = API_KEY
    settings.EMBEDDINGS_HTTP_DIMENSION = server.embedder.dimension
    settings.EMBEDDINGS_HTTP_TIMEOUT = 10
