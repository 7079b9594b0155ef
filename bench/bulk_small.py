"""Benchmark: a bulk load of small documents through the API, beside a plain script doing the same
work on the same cores; and the one-page latency probe (bench/README.md, "Bulk small documents").

The documents are real: pages of the Debian documentation the retrieval-quality corpus is made
of (``bench/eval_corpus.py``: the PostgreSQL 15 and Django 3.2 manuals, LibreOffice and GIMP help
in Chinese), their body text (html -> text as eval_corpus does), the pages of 2-30 KB, a
deterministic sample. Each becomes one ``.txt`` file.

- Platform: ``manage.py serve_web`` (as run_platform starts it, ``DB_POOL=1``) and ``manage.py
  qcluster`` with ``Q_WORKERS=2`` (``DB_CONN_MAX_AGE=60``), the default embedder, a private
  database; the client uploads the files through ``POST /api/batches`` (``--batch-files`` a
  request) over HTTP and honours the platform's backpressure: a 429 (``throttled``) is waited out
  for its ``Retry-After`` and sent again, a file refused in a batch because the workspace's queue
  is full (``quota_exceeded``) is sent again later, with a backoff. Refusals and the time spent
  waiting are counted and printed. Wall time: the first upload request's start to the last
  batch's completion (``completed_at``: every job of it finished), all files ``ready``.
- ``--via folder``: the platform gets the same files as a folder source instead (a collection of
  their own, ``POST /api/sources`` of kind ``folder``, one ``POST .../sync``; the bench user is a
  workspace admin and ``SOURCES_ALLOWED_ROOTS`` names the files' folder); wall time from the sync
  request to the poll (every 0.5 s) that sees the collection's last document ``ready``. The sync
  waits out a full queue itself (``sync_queue_full``).
- Plain script: two processes (one per core), each taking every other file, calling the
  project's own functions directly: ``sniff`` + ``parse``, ``chunk_for_model`` (the settings'
  sizes, the embedder's tokens and window), the configured embedder in batches of
  ``EMBEDDING_BATCH_SIZE``, and the index: ``Chunk`` rows, ``search_index().write_vectors``,
  ``IndexEntry`` rows (full text) in one transaction per document, in a private database of the
  same kind. No job engine, no HTTP, no sandbox, no stored file. Wall time: both processes
  started together (after loading the model) to the later one's end.

Both in the same run, plain first, per database (SQLite, the embedded default; PostgreSQL).
CPU per document: the plain processes' own; the cluster's, the sandbox's and the web server's.
On PostgreSQL also the database server's CPU over each half (its processes, by name, with what
the postmaster reaped: every database of the server, so a quiet machine) and the cores' idle
share (``/proc/stat``).
Target: platform documents/s >= 0.8x the plain script's.

One-page probe (``--probe``, on by default; the platform of the last database measured, after the
bulk load has drained): a one-page text file uploaded through ``POST /api/documents/`` and its
status polled every 20 ms until ``ready``, ``--probe-uploads`` times one after another; p50 (target
<= 300 ms on an idle machine) and p95.

    .venv/bin/python bench/bulk_small.py [--quick] [--docs N] [--batch-files N] [--via batches|folder]
        [--backends ...]
        [--probe-uploads N | --no-probe] [--recycle N] [--json FILE] [--keep]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.common import say

MIN_BYTES, MAX_BYTES = 2_000, 30_000
TARGET_RATIO = 0.8
TARGET_P50_MS = 300.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# --- the corpus --------------------------------------------------------------------------------


def corpus(count: int, seed: int = 7) -> list[dict[str, str]]:
    """``count`` documentation pages of 2-30 KB of text (English and Chinese), a seeded sample."""
    from bench import eval_corpus

    found = [
        page
        for lang in eval_corpus.SOURCES
        for page in eval_corpus.candidates(lang, 10**7)
        if MIN_BYTES <= len(page["text"].encode()) <= MAX_BYTES
    ]
    found.sort(key=lambda p: p["id"])
    if len(found) < count:
        raise SystemExit(f"only {len(found)} pages of 2-30 KB found; install the packages of eval_corpus.py")
    return random.Random(seed).sample(found, count)


def write_files(pages: list[dict[str, str]], folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for n, page in enumerate(pages):
        path = folder / f"d{n:04d}.txt"
        path.write_text(page["text"], encoding="utf-8")
        paths.append(path)
    return paths


# --- the plain script --------------------------------------------------------------------------


def plain_worker(paths: list[str], barrier: Any, queue: Any) -> None:
    """One of the two plain processes: its files through parse, chunk, embed and index."""
    import numpy as np
    from django.conf import settings
    from django.db import connection, transaction

    from documents.bulk_insert import insert_rows
    from documents.embedders import configured_embedder
    from documents.engines.chunking import ChunkInputPage, chunk_for_model, embedded_text
    from documents.engines.parsing import parse
    from documents.engines.sniff import sniff
    from documents.models import Chunk, Document, DocumentVersion, IndexEntry, Tenant
    from documents.retrieval.index import search_index
    from documents.retrieval.text import search_text
    from documents.services.collections import default_collection
    from documents.stages.chunk import CHUNK_FIELDS, sizes_for
    from documents.stages.index import ENTRY_FIELDS

    connection.close()  # a fresh connection of its own after the fork
    tenant = Tenant.objects.get(slug="plain")
    collection = default_collection(tenant)
    embedder = configured_embedder()
    embedder.embed(["warm up the model"])  # loaded before the clock starts, as a worker's is
    maximum, _ = sizes_for(embedder, int(settings.CHUNK_MAX_TOKENS), 0)
    target = min(int(settings.CHUNK_TARGET_TOKENS), maximum)
    size = int(settings.EMBEDDING_BATCH_SIZE)
    index = search_index()
    index.prepare(embedder.name, embedder.dimension)
    chunks_done = 0
    barrier.wait()
    started, cpu = time.time(), time.process_time()
    for name in paths:
        path = Path(name)
        data = path.read_bytes()
        sniffed = sniff(data, filename=path.name)
        assert sniffed is not None
        pages = [ChunkInputPage(number=p.number, blocks=p.blocks) for p in parse(path, sniffed.kind)]
        chunks = chunk_for_model(
            pages,
            title=path.name,
            count=embedder.count_tokens,
            window=embedder.window,
            target_tokens=target,
            max_tokens=maximum,
        )
        texts = [embedded_text(path.name, c.text) for c in chunks]
        vectors = [
            np.asarray(embedder.embed(texts[s : s + size]), dtype=np.float32)
            for s in range(0, len(texts), size)
        ]
        with transaction.atomic():
            document = Document.objects.create(tenant=tenant, collection=collection, title=path.name)
            version = DocumentVersion.objects.create(
                document=document,
                number=1,
                file=f"plain/{path.name}",
                original_name=path.name,
                kind=sniffed.kind,
                content_type="text/plain",
                size=len(data),
                sha256="0" * 64,
            )
            rows = [
                (version.pk, c.ordinal, c.text, c.page_start, c.page_end, list(c.heading_path))
                for c in chunks
            ]
            insert_rows(Chunk, CHUNK_FIELDS, rows)
            for batch, part in enumerate(vectors):
                ordinals = [c.ordinal for c in chunks[batch * size : batch * size + len(part)]]
                index.write_vectors(version.pk, batch, embedder.name, ordinals, part)
            ids = dict(Chunk.objects.filter(version=version).values_list("ordinal", "pk"))
            entries = [
                (
                    tenant.pk,
                    document.pk,
                    version.pk,
                    ids[c.ordinal],
                    c.ordinal,
                    c.ordinal // size,
                    embedder.name,
                    search_text(text),
                )
                for c, text in zip(chunks, texts, strict=True)
            ]
            insert_rows(IndexEntry, ENTRY_FIELDS, entries)
        chunks_done += len(chunks)
    queue.put(
        {
            "started": started,
            "ended": time.time(),
            "cpu_s": time.process_time() - cpu,
            "docs": len(paths),
            "chunks": chunks_done,
        }
    )


def plain_child(files: list[str]) -> dict[str, Any]:
    """The plain script's parent: migrate its database, then two processes of one core each."""
    import multiprocessing

    from django.db import connections

    from documents.models import Tenant

    common.migrate()
    Tenant.objects.create(slug="plain", name="Plain", max_queued_jobs=100_000)
    connections.close_all()
    fork = multiprocessing.get_context("fork")  # Django is set up; each process opens its own connection
    barrier, queue = fork.Barrier(3), fork.Queue()  # the two processes and this one: the clock
    workers = [fork.Process(target=plain_worker, args=(files[n::2], barrier, queue)) for n in range(2)]
    for worker in workers:
        worker.start()
    barrier.wait()
    reading = machine_reading()
    results = [queue.get(timeout=7200) for _ in workers]
    machine = since(reading)  # up to the later process's end, as the wall time
    for worker in workers:
        worker.join()
    started = min(r["started"] for r in results)
    ended = max(r["ended"] for r in results)
    docs = sum(r["docs"] for r in results)
    return {
        "docs": docs,
        "chunks": sum(r["chunks"] for r in results),
        "wall_s": ended - started,
        "docs_per_s": docs / (ended - started),
        "per_process_s": [r["ended"] - r["started"] for r in results],
        "cpu_s": sum(r["cpu_s"] for r in results),
        "machine_s": machine,
    }


def setup_child() -> dict[str, Any]:
    """The platform's database: migrated, a user and a token in a workspace of defaults."""
    from documents.services.accounts import user_create_in_tenant

    common.migrate()
    token = user_create_in_tenant(username="bench", tenant_slug="bench")
    from documents.models import Membership, Tenant

    # A workspace admin: only they may make a source (``--via folder``).
    Membership.objects.filter(user__username="bench").update(is_admin=True)

    tenant = Tenant.objects.get(slug="bench")
    return {
        "token": token,
        "max_queued_jobs": tenant.max_queued_jobs,
        "max_running_jobs": tenant.max_running_jobs,
    }


def stats_child() -> dict[str, Any]:
    """After a platform run: the jobs' states, chunks, and each stage's total time."""
    from collections import Counter

    from documents.models import Chunk, DocumentVersion, Tenant
    from jobs.models import Job, StageRun

    tenant = Tenant.objects.get(slug="bench")
    states = Counter(Job.objects.filter(tenant=tenant.slug).values_list("status", flat=True))
    stages: dict[str, float] = {}
    for run in StageRun.objects.filter(job__tenant=tenant.slug).exclude(finished_at=None):
        stages[run.stage] = stages.get(run.stage, 0.0) + (run.finished_at - run.started_at).total_seconds()
    # The probe's jobs (its files are log-N.txt): where one upload's time to ready goes, median ms
    # of each step (queued -> a worker starts it, each stage, the last stage's end -> ready).
    steps: dict[str, list[float]] = {}
    probe_job_ids = DocumentVersion.objects.filter(
        document__tenant=tenant, original_name__startswith="log-"
    ).values_list("job_id", flat=True)
    for job in Job.objects.filter(pk__in=list(probe_job_ids), status="ready"):
        runs = sorted(job.runs.exclude(finished_at=None), key=lambda r: r.started_at)
        if not runs or job.queued_at is None or job.finished_at is None:
            continue
        marks = [("queued -> first stage", job.queued_at, runs[0].started_at)]
        marks += [(run.stage, run.started_at, run.finished_at) for run in runs]
        marks.append(("last stage -> ready", runs[-1].finished_at, job.finished_at))
        for name, start, end in marks:
            steps.setdefault(name, []).append((end - start).total_seconds() * 1000)
    return {
        "states": dict(states),
        "chunks": Chunk.objects.filter(version__document__tenant=tenant).count(),
        "stage_s": stages,
        "probe_steps_ms": {name: common.median(values) for name, values in steps.items()},
    }


# --- the platform ------------------------------------------------------------------------------


class Proc(NamedTuple):
    parent: int
    group: int
    start: int  # clock ticks after boot: with the pid, a process that a reused pid cannot fake
    own: int  # CPU ticks of its own
    reaped: int  # CPU ticks of the children it reaped (and theirs)


def _processes(named: str | None = None) -> dict[int, Proc]:
    """Every process (or every one whose command is ``named``), by pid."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            command, rest = stat.read_text().split("(", 1)[1].rsplit(")", 1)
            if named is not None and command != named:
                continue
            f = [int(n) for n in rest.split()[1:20]]
            found[int(stat.parent.name)] = Proc(f[0], f[1], f[18], f[10] + f[11], f[12] + f[13])
    return found


def machine_cpu() -> tuple[float, float]:
    """Seconds of CPU time of all cores so far (``/proc/stat``): (all, idle + I/O wait)."""
    ticks = [int(n) for n in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return sum(ticks) / CLOCK_TICKS, (ticks[3] + ticks[4]) / CLOCK_TICKS


def server_cpu() -> float:
    """CPU seconds of the local PostgreSQL server so far: its live processes' own and what the
    postmaster reaped of those that ended (a backend starts a session of its own, so it is found
    by name, not by group). Counts every database of the server: the benchmark's alone on a quiet
    machine."""
    found = _processes("postgres")
    ticks = sum(p.own for p in found.values())
    ticks += sum(p.reaped for p in found.values() if p.parent not in found)  # the postmaster
    return ticks / CLOCK_TICKS


def machine_reading() -> dict[str, float]:
    """The cores' time, their idle part and the database server's CPU, read together."""
    total, idle = machine_cpu()
    return {"cores": total, "idle": idle, "server": server_cpu()}


def since(reading: dict[str, float]) -> dict[str, float]:
    """What ``machine_reading`` grew by since ``reading``."""
    return {k: v - reading[k] for k, v in machine_reading().items()}


def group_cpu(pgid: int, processes: dict[int, Proc] | None = None) -> float:
    """CPU seconds of the processes in process group ``pgid`` (their own and their reaped
    children's)."""
    ticks = sum(p.own + p.reaped for p in (processes or _processes()).values() if p.group == pgid)
    return ticks / CLOCK_TICKS


def sandboxed(pid: int, processes: dict[int, Proc]) -> list[int]:
    """The descendants of ``pid`` outside its process group: the parsing sandbox's processes
    (bubblewrap, its namespace's first process, the fork server or a child per file, the
    processes forked per call), started in sessions of their own."""
    children: dict[int, list[int]] = {}
    for child, proc in processes.items():
        children.setdefault(proc.parent, []).append(child)
    group = processes[pid].group if pid in processes else pid
    found, todo = [], list(children.get(pid, []))
    while todo:
        current = todo.pop()
        todo += children.get(current, [])
        if processes[current].group != group:
            found.append(current)
    return found


class Seen(NamedTuple):
    """A sandbox process's last reading."""

    parent: tuple[int, int]  # (pid, start); a process of the cluster's group is not in ``seen``
    ticks: int  # its own CPU and its reaped children's
    reaped: int  # its reaped children's
    parent_reaped: int  # the parent's reaped ticks at the same sample
    sample: int


class SandboxMeter(threading.Thread):
    """The CPU of a cluster's sandbox processes, read from /proc every ``every`` seconds.

    One read at the end misses what ended before it: q2 replaces a worker after ``recycle``
    tasks, its fork server ends with it, and when a sandbox namespace's first process dies the
    kernel reaps the namespace's other processes without adding their CPU to anyone's reaped
    ticks. So every sandbox process ever seen keeps its last reading (one that ended loses at
    most its last interval), unless its parent's reaped ticks, read after it ended, grew by as
    much: then the parent reaped it and holds its CPU.
    """

    def __init__(self, cluster: int, every: float = 0.5) -> None:
        super().__init__(name="sandbox-meter", daemon=True)
        self.cluster, self.every = cluster, every
        self.seen: dict[tuple[int, int], Seen] = {}  # by (pid, start)
        self.samples = 0
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.sample()

    def run(self) -> None:
        while not self.stopped.wait(self.every):
            self.sample()

    def sample(self) -> dict[int, Proc]:
        processes = _processes()
        with self.lock:
            self.samples += 1
            for pid in sandboxed(self.cluster, processes):
                proc = processes[pid]
                parent = processes.get(proc.parent, Proc(0, 0, 0, 0, 0))
                ticks = proc.own + proc.reaped
                self.seen[(pid, proc.start)] = Seen(
                    (proc.parent, parent.start), ticks, proc.reaped, parent.reaped, self.samples
                )
        return processes

    def reading(self) -> tuple[float, float]:
        """CPU seconds of every sandbox process seen so far, and the part of it that the cluster's
        own processes reaped (a process that ended with its parent in the cluster's group: its
        worker, or the qcluster leader, a child subreaper, once its worker was replaced)."""
        with self.lock:
            total = reaped_by_cluster = 0
            for one in self.seen.values():
                parent = self.seen.get(one.parent)
                if parent and parent.sample > one.sample and parent.reaped >= one.parent_reaped + one.ticks:
                    continue  # its parent reaped it: its CPU is in the parent's reading
                total += one.ticks
                if parent is None and one.sample < self.samples:
                    reaped_by_cluster += one.ticks
        return total / CLOCK_TICKS, reaped_by_cluster / CLOCK_TICKS


def cluster_cpu(meter: SandboxMeter, web: int) -> dict[str, float]:
    """The CPU seconds so far of the cluster's process group ("workers", less the sandbox
    processes it reaped: those are in "sandbox"), of its sandbox processes (the meter's) and of
    the web server's group: read before either stops."""
    processes = meter.sample()
    sandbox, reaped = meter.reading()
    return {
        "workers": group_cpu(meter.cluster, processes) - reaped,
        "sandbox": sandbox,
        "web": group_cpu(web, processes),
        "reaped": reaped,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Client:
    """An API client that honours the platform's refusals and counts them."""

    def __init__(self, base: str, token: str) -> None:
        import httpx

        self.http = httpx.Client(base_url=base, headers={"Authorization": f"Token {token}"}, timeout=120)
        self.throttled = 0  # 429 answers
        self.queue_full = 0  # files refused in a batch: the workspace's queue was full
        self.waited_s = 0.0

    def wait(self, seconds: float) -> None:
        self.waited_s += seconds
        time.sleep(seconds)

    def post(self, path: str, **kwargs: Any) -> Any:
        """POST, waiting out every 429 for its Retry-After."""
        while True:
            answer = self.http.post(path, **kwargs)
            if answer.status_code != 429:
                return answer
            self.throttled += 1
            self.wait(max(0.2, float(answer.headers.get("Retry-After") or 1)))


def upload_all(client: Client, paths: list[Path], batch_files: int) -> dict[str, Any]:
    """Every file through /api/batches; a file refused for a full queue goes again, after a backoff."""
    data = {p.name: p.read_bytes() for p in paths}
    todo = deque(p.name for p in paths)
    batches: list[str] = []
    backoff = 0.25
    first = time.time()
    while todo:
        part = [todo.popleft() for _ in range(min(batch_files, len(todo)))]
        files = [("files", (name, data[name], "text/plain")) for name in part]
        answer = client.post("/api/batches", files=files)
        if answer.status_code != 201:
            raise RuntimeError(f"batch refused: {answer.status_code} {answer.text[:500]}")
        body = answer.json()
        batches.append(body["batch_id"])
        again = []
        for item in body["documents"]:
            error = item.get("error")
            if error is None:
                continue
            if error["code"] != "quota_exceeded":
                raise RuntimeError(f"{item['filename']} refused: {error}")
            again.append(item["filename"])
        if again:
            client.queue_full += len(again)
            todo.extendleft(reversed(again))
            client.wait(backoff)
            backoff = min(backoff * 2, 4.0)
        else:
            backoff = 0.25
    uploaded = time.time()
    # Done when every batch has completed (all its jobs finished); its completed_at is the last one's.
    # One request a second at most (the oldest open batch): the poll takes little of the web
    # server's CPU, and the time comes from the server's completed_at, not from the poll.
    ends: list[float] = []
    open_batches = deque(batches)
    while open_batches:
        body = client.http.get(f"/api/batches/{open_batches[0]}").json()
        if body["completed_at"] is None:
            time.sleep(1.0)
            continue
        counts = body["file_counts"]
        if counts["ready"] != counts["total"]:
            raise RuntimeError(f"batch {body['batch_id']} finished with {counts}")
        ends.append(datetime.fromisoformat(body["completed_at"]).timestamp())
        open_batches.popleft()
    last = max(ends)
    return {
        "docs": len(paths),
        "batches": len(batches),
        "wall_s": last - first,
        "docs_per_s": len(paths) / (last - first),
        "upload_s": uploaded - first,
        "throttled_429": client.throttled,
        "queue_full_refusals": client.queue_full,
        "waited_s": client.waited_s,
    }


def sync_folder(client: Client, folder: Path, count: int) -> dict[str, Any]:
    """The same files as a folder source of a collection of their own: the source made, one sync
    asked for, then the collection's counts polled every 0.5 s until all ``count`` documents are
    ``ready`` (the sync itself waits out a full queue: ``sync_queue_full``, retried by the
    platform). Wall time: the sync request to the poll that saw the last one ready."""

    def answered(answer: Any) -> Any:
        if answer.status_code >= 300:
            raise RuntimeError(f"{answer.request.url}: {answer.status_code} {answer.text[:300]}")
        return answer.json()

    collection = answered(client.post("/api/collections/", json={"name": "folder"}))["id"]
    config = {"path": str(folder)}
    source = {"name": "bulk", "collection": collection, "kind": "folder", "config": config}
    source_id = answered(client.post("/api/sources/", json=source))["id"]
    first = time.time()
    answered(client.post(f"/api/sources/{source_id}/sync"))
    while True:
        counts = client.http.get(f"/api/collections/{collection}/").json()["document_counts"]
        if counts["failed"] or counts["cancelled"]:
            raise RuntimeError(f"folder load: {counts}")
        if counts["ready"] >= count:
            break
        time.sleep(0.5)
    last = time.time()
    sync = client.http.get(f"/api/sources/{source_id}/").json()["last_sync"]
    return {
        "wall_s": last - first,
        "docs_per_s": count / (last - first),
        "upload_s": float(sync.get("duration_seconds") or 0.0),
        "batches": 0,
        "throttled_429": client.throttled,
        "queue_full_refusals": 0,
        "waited_s": 0.0,
        "sync": {"state": sync.get("state"), "counts": sync.get("counts")},
    }


def probe(client: Client, uploads: int) -> dict[str, Any]:
    """A one-page text file uploaded and followed to ready, ``uploads`` times one after another."""
    text = (
        "The lighthouse keeper writes the tide, the wind and the ships seen every morning at dawn. "
        "Each entry names the hour, the height of the water and the weather over the harbour. "
    ) * 8
    latencies: list[float] = []
    client.throttled, client.waited_s = 0, 0.0
    for n in range(uploads):
        body = f"Keeper's log, day {n}.\n\n{text}".encode()
        started = time.perf_counter()
        answer = client.http.post("/api/documents/", files={"file": (f"log-{n}.txt", body, "text/plain")})
        if answer.status_code == 429:
            client.throttled += 1
            client.wait(max(0.2, float(answer.headers.get("Retry-After") or 1)))
            continue
        if answer.status_code != 201:
            raise RuntimeError(f"upload refused: {answer.status_code} {answer.text[:300]}")
        status_url = answer.json()["status_url"]
        while True:
            state = client.http.get(status_url).json()["state"]
            if state == "ready":
                break
            if state.endswith("_failed") or state in ("cancelled", "stalled"):
                raise RuntimeError(f"probe upload ended {state}")
            time.sleep(0.02)
        latencies.append(time.perf_counter() - started)
        time.sleep(0.2)  # one after another, the machine idle in between
    ms = [s * 1000 for s in latencies]
    return {
        "uploads": len(ms),
        "p50_ms": common.percentile(ms, 50),
        "p95_ms": common.percentile(ms, 95),
        "max_ms": max(ms) if ms else float("nan"),
        "throttled_429": client.throttled,
        "waited_s": client.waited_s,
    }


def platform_run(
    args: argparse.Namespace, backend: str, url: str, var: Path, paths: list[Path], warm: list[Path]
) -> dict[str, Any]:
    recycle = {"Q_RECYCLE": str(args.recycle)} if args.recycle else {}
    folder = {"SOURCES_ALLOWED_ROOTS": str(paths[0].parent)} if args.via == "folder" else {}
    env = common.base_env(
        settings="config.settings", database_url=url, var_dir=var, Q_WORKERS="2", **recycle, **folder
    )
    setup = common.child_result(
        [common.PYTHON, __file__, "--child", "setup"], env, timeout=600, what=f"{backend} setup"
    )
    port = free_port()
    children = common.Children(var)
    try:
        web = children.manage(
            "web", ["serve_web", "--host", "127.0.0.1", "--port", str(port)], {**env, "DB_POOL": "1"}
        )
        cluster = children.manage("qcluster", ["qcluster"], {**env, "DB_CONN_MAX_AGE": "60"})
        client = Client(f"http://127.0.0.1:{port}", setup["token"])

        def up() -> bool:
            with contextlib.suppress(Exception):
                return bool(client.http.get("/api/documents/").status_code == 200)
            return False

        common.wait_for(up, timeout=120, interval=0.5, what="the web server")
        # Warm-up: both workers load the model and start their sandbox child; not measured.
        upload_all(client, warm, len(warm))
        client.throttled, client.queue_full, client.waited_s = 0, 0, 0.0
        how = "as a folder source" if args.via == "folder" else f"uploading, {args.batch_files} a batch"
        say(f"  [{backend}] platform: {len(paths)} files, {how} ...")
        profiler = start_profiler(args, children, cluster, backend)
        meter = SandboxMeter(cluster.pid)
        meter.start()
        cpu, reading = cluster_cpu(meter, web.pid), machine_reading()
        if args.via == "folder":
            bulk = sync_folder(client, paths[0].parent, len(paths))
        else:
            bulk = upload_all(client, paths, args.batch_files)
        bulk["cpu_s"] = {k: v - cpu[k] for k, v in cluster_cpu(meter, web.pid).items()}
        bulk["machine_s"] = since(reading)  # to the last batch seen complete (up to 1 s late)
        meter.stopped.set()
        if profiler is not None:  # py-spy writes its file at SIGINT
            os.kill(profiler.pid, signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                profiler.wait(timeout=60)
        result: dict[str, Any] = {"bulk": bulk, "quota": setup}
        if args.probe_uploads and backend == args.backends.split(",")[-1]:
            time.sleep(3)
            say(f"  [{backend}] one-page probe: {args.probe_uploads} uploads one after another ...")
            result["probe"] = probe(client, args.probe_uploads)
        for proc in (cluster, web):
            children.stop(proc, grace=30)
        result["stats"] = common.child_result(
            [common.PYTHON, __file__, "--child", "stats"], env, timeout=600, what=f"{backend} stats"
        )
        return result
    except Exception:
        say(children.log_tail("qcluster"))
        say(children.log_tail("web"))
        raise
    finally:
        children.stop_all()


def start_profiler(
    args: argparse.Namespace, children: common.Children, cluster: Any, backend: str
) -> subprocess.Popen[bytes] | None:
    """py-spy over the cluster's process tree during the bulk load, when asked (``--profile DIR``)."""
    if not args.profile:
        return None
    spy = Path(common.PYTHON).with_name("py-spy")
    out = Path(args.profile) / f"bulk-{backend}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [str(spy), "record", "--subprocesses", "--format", "raw", "-r", "50", "-o", str(out)]
    return children.start("py-spy", [*command, "--pid", str(cluster.pid)], dict(os.environ))


# --- the run -----------------------------------------------------------------------------------


def run_backend(
    args: argparse.Namespace, backend: str, tmp: Path, paths: list[Path], warm: list[Path]
) -> Any:
    """The plain script, then the platform, on one kind of database (each its own)."""

    def database(label: str) -> Any:
        if backend == "postgres":
            return common.bench_database(label, keep=args.keep)
        return contextlib.nullcontext(("", ""))

    with database("bulkplain") as (_, url):
        var = tmp / f"{backend}-plain"
        env = common.base_env(settings="config.settings", database_url=url, var_dir=var)
        say(f"  [{backend}] plain script: {len(paths)} files, two processes ...")
        plain = common.child_result(
            [common.PYTHON, __file__, "--child", "plain", "--files", str(tmp / "files")],
            env,
            timeout=7200,
            what=f"{backend} plain",
        )
    with database("bulkplatform") as (_, url):
        platform = platform_run(args, backend, url, tmp / f"{backend}-platform", paths, warm)
    return plain, platform


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    common.common_args(parser)
    parser.add_argument("--docs", type=int, default=None, help="Files (default 1000, --quick 40).")
    parser.add_argument("--batch-files", type=int, default=25, help="Files per /api/batches request.")
    parser.add_argument(
        "--via",
        choices=["batches", "folder"],
        default="batches",
        help="How the platform gets the files: uploads to /api/batches, or one sync of a folder source.",
    )
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument(
        "--probe-uploads", type=int, default=None, help="One-page probe uploads (default 40, --quick 10)."
    )
    parser.add_argument("--no-probe", action="store_true")
    parser.add_argument(
        "--recycle", type=int, metavar="N", help="Tasks a q2 worker runs before it is replaced (default 500)."
    )
    parser.add_argument(
        "--profile", metavar="DIR", help="py-spy the cluster during the bulk load (raw stacks)."
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--files", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        common.setup_django(dict(os.environ))
        if args.child == "plain":
            result = plain_child(sorted(str(p) for p in Path(args.files).glob("*.txt")))
        elif args.child == "setup":
            result = setup_child()
        else:
            result = stats_child()
        print("RESULT " + json.dumps(result), flush=True)
        return 0
    docs = args.docs or (40 if args.quick else 1000)
    args.probe_uploads = 0 if args.no_probe else (args.probe_uploads or (10 if args.quick else 40))

    through = "a folder source" if args.via == "folder" else "/api/batches"
    common.header(f"bulk load: {docs} small documents through {through} vs a plain script, 2 processes")
    common.print_machine()
    load_before = os.getloadavg()
    report = common.Report("bulk_small")
    pages = corpus(docs + 2)
    with common.temp_dir("bulk", args.keep) as tmp:
        paths = write_files(pages[:docs], tmp / "files")
        warm = write_files(pages[docs:], tmp / "warm")
        sizes = sorted(p.stat().st_size for p in paths)
        langs = {lang: sum(1 for p in pages[:docs] if p["lang"] == lang) for lang in ("en", "zh")}
        say(
            f"corpus: {docs} pages ({', '.join(f'{k} {v}' for k, v in langs.items())}), "
            f"{sum(sizes) / 1e6:.1f} MB, median {common.median(sizes) / 1000:.1f} KB "
            f"(min {sizes[0] / 1000:.1f}, max {sizes[-1] / 1000:.1f})"
        )
        report.figures["corpus"] = {"docs": docs, "bytes": sum(sizes), "langs": langs}
        for backend in args.backends.split(","):
            plain, platform = run_backend(args, backend, tmp, paths, warm)
            bulk = platform["bulk"]
            ratio = bulk["docs_per_s"] / plain["docs_per_s"]
            say(
                f"\n[{backend}] plain script: {plain['docs_per_s']:.2f} docs/s ({plain['wall_s']:.1f} s, "
                f"{plain['chunks']} chunks; processes "
                f"{', '.join(f'{s:.1f}' for s in plain['per_process_s'])} s)"
            )
            say(
                f"[{backend}] platform:     {bulk['docs_per_s']:.2f} docs/s ({bulk['wall_s']:.1f} s "
                + (
                    f"sync asked -> last ready; the sync's own stages took {bulk['upload_s']:.1f} s: "
                    f"{bulk['sync']['state']}, {bulk['sync']['counts']}) "
                    if args.via == "folder"
                    else f"first upload -> last ready; uploads done after {bulk['upload_s']:.1f} s "
                    f"in {bulk['batches']} batches) "
                )
                + f"ratio {ratio:.2f}x"
            )
            say(
                f"[{backend}] backpressure: {bulk['throttled_429']} x 429 throttled, "
                f"{bulk['queue_full_refusals']} files refused for a full queue "
                f"(max_queued_jobs {platform['quota']['max_queued_jobs']}), {bulk['waited_s']:.1f} s waited"
            )
            cpu = bulk["cpu_s"]
            say(
                f"[{backend}] CPU per document: plain {plain['cpu_s'] / docs:.3f} s; platform cluster "
                f"{cpu['workers'] / docs:.3f} s + sandbox {cpu['sandbox'] / docs:.3f} s + web server "
                f"{cpu['web'] / docs:.3f} s (CPU ratio plain / platform "
                f"{plain['cpu_s'] / (cpu['workers'] + cpu['sandbox'] + cpu['web']):.2f}: if both had "
                f"the cores alone); {cpu['reaped']:.2f} s of the sandbox's "
                "were reaped by the cluster and taken off its figure"
            )
            if backend == "postgres":
                pm, bm = plain["machine_s"], bulk["machine_s"]
                platform_cpu = cpu["workers"] + cpu["sandbox"] + cpu["web"]
                with_server = (plain["cpu_s"] + pm["server"]) / (platform_cpu + bm["server"])
                say(
                    f"[{backend}] the machine meanwhile: database server CPU a document plain "
                    f"{pm['server'] / docs:.3f} s, platform {bm['server'] / docs:.3f} s; cores idle "
                    f"{100 * pm['idle'] / pm['cores']:.1f} % (plain), {100 * bm['idle'] / bm['cores']:.1f} % "
                    f"(platform); CPU ratio with the server's part {with_server:.2f}"
                )
            stats = platform["stats"]
            say(
                f"[{backend}] jobs: {stats['states']}, {stats['chunks']} chunks; stage time summed over "
                "jobs: " + ", ".join(f"{k} {v:.1f} s" for k, v in stats["stage_s"].items())
            )
            report.figures[backend] = {"plain": plain, "platform": platform, "ratio": ratio}
            report.check(
                f"{backend}{' (folder source)' if args.via == 'folder' else ''}: platform / plain docs/s",
                ratio,
                TARGET_RATIO,
                higher_is_better=True,
                unit="x",
            )
            if "probe" in platform:
                pr = platform["probe"]
                say(
                    f"[{backend}] one-page probe: {pr['uploads']} uploads, p50 {pr['p50_ms']:.0f} ms, "
                    f"p95 {pr['p95_ms']:.0f} ms, max {pr['max_ms']:.0f} ms ({pr['throttled_429']} x 429, "
                    f"{pr['waited_s']:.1f} s waited)"
                )
                steps = stats.get("probe_steps_ms") or {}
                if steps:
                    say(
                        f"[{backend}] one-page probe, median ms a step: "
                        + ", ".join(f"{name} {ms:.0f}" for name, ms in steps.items())
                    )
                report.figures["probe"] = {**pr, "backend": backend, "steps_ms": steps}
                report.check(
                    f"{backend}: one-page upload -> ready p50",
                    pr["p50_ms"],
                    TARGET_P50_MS,
                    higher_is_better=False,
                    unit=" ms",
                )
                report.notes.append(f"one-page probe p95 {pr['p95_ms']:.0f} ms (no target)")
    load_after = os.getloadavg()
    report.figures["loadavg"] = {"before": load_before, "after": load_after}
    say(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    report.print()
    report.dump(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
