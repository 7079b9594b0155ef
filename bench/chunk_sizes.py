"""Benchmark: how an embedder's meaning-search ranks at each chunk size, on real documentation.

For each ``target/maximum`` pair (in the embedder's own tokens), the retrieval-quality corpora
(``bench/eval_corpus.py``: the four manuals and Debian's two books, 300 pages a language) are cut
by the platform's chunker for that embedder (title header and all, as the chunk stage cuts
them), every chunk is embedded, and each page's known-item query (its title) ranks the pages by
their best chunk's cosine: exactly what ``semantic`` search answers on SQLite (exact), without
the API around it. MRR@10 per corpus and language, beside ``bm25s`` over the whole pages (the
baseline of ``retrieval_quality.py``). Embedding is the slow part: a few minutes a size for e5.

    .venv/bin/python bench/chunk_sizes.py [--embedder e5] [--sizes 350/500,200/256] [--pages 300]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common, eval_corpus
from bench.common import say
from bench.embed_speed import real_documents
from bench.retrieval_quality import LANGS, bm25_ranks, metrics, rank_of

SIZES = "350/500,300/350,250/256,200/256,150/200"


def page_mrr(corpus: list[dict[str, str]], documents: list[list[str]], embedder: Any) -> dict[str, float]:
    """MRR@10 per language of each page's query against the pages ranked by their best chunk."""
    from documents.embedders.base import embed_queries  # after Django's setup, as the project's modules

    owner = np.array([n for n, chunks in enumerate(documents) for _ in chunks])
    vectors = np.asarray(embedder.embed([text for chunks in documents for text in chunks]), dtype=np.float32)
    queries = np.asarray(embed_queries(embedder, [page["query"] for page in corpus]), dtype=np.float32)
    scores = queries @ vectors.T
    best = np.full((len(corpus), len(documents)), -np.inf, dtype=np.float32)
    np.maximum.at(best.T, owner, scores.T)
    ranks: dict[str, list[int | None]] = {}
    for n, page in enumerate(corpus):
        ranked = [str(i) for i in np.argsort(-best[n], kind="stable")[:10]]
        ranks.setdefault(page["lang"], []).append(rank_of(str(n), ranked))
    return {lang: round(metrics(found)["mrr@10"], 3) for lang, found in sorted(ranks.items())}


def bm25_mrr(corpus: list[dict[str, str]]) -> dict[str, float]:
    ranks = bm25_ranks(corpus)
    return {lang: round(metrics(ranks[lang])["mrr@10"], 3) for lang in LANGS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedder", default="e5")
    parser.add_argument("--sizes", default=SIZES, help="target/maximum pairs, comma-separated")
    parser.add_argument("--pages", type=int, default=300, help="pages per language of each corpus")
    args = parser.parse_args()
    common.setup_django({"DJANGO_SETTINGS_MODULE": "config.settings"})
    from documents.embedders import get_embedder

    embedder = get_embedder(args.embedder)
    sizes = [tuple(int(n) for n in pair.split("/")) for pair in args.sizes.split(",")]
    common.print_machine()
    say(f"{embedder.name}, window {embedder.window}")
    say(f"{'corpus':8} {'target/max':>11} {'chunks':>7}  MRR@10 per language")
    for source in ("manuals", "debian"):
        corpus = eval_corpus.build(args.pages, source=source)
        say(f"{source:8} {'bm25s':>11} {'':>7}  {bm25_mrr(corpus)}")
        for target, maximum in sizes:
            documents = real_documents(corpus, embedder, target, maximum)
            chunks = sum(len(d) for d in documents)
            say(
                f"{source:8} {f'{target}/{maximum}':>11} {chunks:>7}  {page_mrr(corpus, documents, embedder)}"
            )


if __name__ == "__main__":
    main()
