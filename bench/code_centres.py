"""Benchmark: how many of the true nearest the sign codes keep, with and without a centre.

The binary codes (PostgreSQL without pgvector ranks every query by them; pgvector ranks a
selective scope by them) keep the sign of each component. A model whose vectors all share one
large direction (multilingual-e5: any two of its passages sit at a cosine of 0.8, the mean of its
unit vectors has a norm of 0.9) has the same sign in most components of every vector, and its
codes tell its vectors apart badly. Taking the signs of the vector minus that shared direction
(the model's centre) is the remedy measured here.

On the retrieval-quality corpus's real chunks (``bench/eval_corpus.py``, cut by the platform's
chunker for the model, the text the embedding stage embeds), for each embedder: the centre is the
mean of one corpus's chunk vectors (``manuals``: Debian's PostgreSQL and Django manuals,
LibreOffice and GIMP help in Chinese), and recall@10 is measured on the other (``debian``:
Debian's two books), so the centre is judged on text it was not taken from. For each page's
known-item query: the exact top 10 by cosine over all chunks, against the ``R`` nearest codes
(the codes' two-bit Hamming distance, as ``documents.retrieval.codes`` computes it) ordered again
by cosine, with ``R`` the re-rank depth the search uses (``SIGN_RERANK``) and a quarter of it.

``--write`` prints the centres module (``documents/retrieval/centres.py``) from the centre found.

    .venv/bin/python bench/code_centres.py [--pages N] [--embedders e5,local] [--write] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.common import say


def chunk_vectors(embedder: Any, source: str, pages: int) -> tuple[np.ndarray, np.ndarray]:
    from bench import eval_corpus
    from bench.embed_speed import real_documents
    from documents.embedders.base import embed_queries

    corpus = eval_corpus.build(pages, source=source)
    chunks = [text for document in real_documents(corpus) for text in document]
    vectors = np.asarray(embedder.embed(chunks), dtype=np.float32)
    queries = np.asarray(embed_queries(embedder, [page["query"] for page in corpus]), dtype=np.float32)
    return vectors, queries


def codes(vectors: np.ndarray, centre: np.ndarray | None) -> np.ndarray:
    """(x > c) - (x < c) per component: the two-bit code's distance is the L1 distance of these."""
    shifted = vectors if centre is None else vectors - centre
    return np.sign(shifted).astype(np.int8)


def recall(vectors: np.ndarray, queries: np.ndarray, centre: np.ndarray | None, depth: int) -> float:
    scores = queries @ vectors.T
    exact = np.argsort(-scores, axis=1, kind="stable")[:, :10]
    stored, asked = codes(vectors, centre), codes(queries, centre)
    found = []
    for i in range(len(queries)):
        distance = np.abs(stored.astype(np.int16) - asked[i]).sum(axis=1)
        shortlist = np.argsort(distance, kind="stable")[:depth]
        top = shortlist[np.argsort(-scores[i, shortlist], kind="stable")[:10]]
        found.append(len(set(top.tolist()) & set(exact[i].tolist())) / 10)
    return float(np.mean(found))


def module_text(name: str, centre: np.ndarray) -> str:
    values = ",\n".join(
        "    " + ", ".join(f"{float(x):.6g}" for x in centre[i : i + 8]) for i in range(0, len(centre), 8)
    )
    return f"CENTRES[{name!r}] = (\n{values},\n)\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=300, help="pages per language of each corpus")
    parser.add_argument("--embedders", default="e5,local")
    parser.add_argument("--write", action="store_true", help="print the centres module's entries")
    parser.add_argument("--json")
    args = parser.parse_args()
    common.setup_django({"DJANGO_SETTINGS_MODULE": "config.settings"})
    from documents.embedders import get_embedder
    from documents.retrieval import centres as shipped
    from documents.retrieval.codes import SIGN_RERANK

    common.print_machine()
    report: dict[str, Any] = {}
    for spec in args.embedders.split(","):
        embedder = get_embedder(spec)
        fit, _ = chunk_vectors(embedder, "manuals", args.pages)
        held, queries = chunk_vectors(embedder, "debian", args.pages)
        centre = fit.mean(axis=0)
        pairs = held @ held.T
        row: dict[str, Any] = {
            "chunks": [len(fit), len(held)],
            "mean_pair_cosine": float(pairs[np.triu_indices(len(held), 1)].mean()),
            "centre_norm": float(np.linalg.norm(centre)),
        }
        candidates = {"plain": None, "centre of the other corpus": centre}
        if embedder.name in shipped.CENTRES:
            candidates["shipped centre"] = shipped.centre(embedder.name)
        say(
            f"\n{embedder.name}: {row['chunks'][0]} chunks to take the centre from, {row['chunks'][1]} "
            f"to measure on; mean cosine of two chunks {row['mean_pair_cosine']:.3f}, "
            f"|centre| {row['centre_norm']:.3f}"
        )
        for label, c in candidates.items():
            for depth in (SIGN_RERANK // 4, SIGN_RERANK):
                value = recall(held, queries, c, depth)
                row[f"{label} R={depth}"] = value
                say(f"  recall@10 {label:28s} R={depth:4d}: {value:.3f}")
        report[embedder.name] = row
        if args.write:
            say(module_text(embedder.name, centre))
    if args.json:
        Path(args.json).write_text(
            json.dumps({"machine": common.machine_info(), "results": report}, indent=2)
        )


if __name__ == "__main__":
    main()
