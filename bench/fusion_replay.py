"""Replay hybrid search's fusion offline: does another way of fusing beat the shipped one?

Ingests the retrieval-quality corpus (``bench/eval_corpus.py``) through ``/api/batches`` on the
embedded default (SQLite, ``Q_SYNC``, the default embedder), then searches every page's
known-item query once in ``hybrid`` mode through ``/api/search`` while recording the two ranked
lists and the dense list's confidence that ``documents.search`` hands to its fusion. Each fusion
below is then replayed on those lists (document level: a document's best chunk), and MRR@10 /
recall@1 are printed per language, for all queries and for the even and odd halves (a setting
that wins on one half only is noise):

- ``api hybrid``: what the API answered (the shipped weighted RRF);
- ``lexical`` / ``semantic``: each list alone;
- ``rrf dense w``: RRF with the dense list's weight scaled by w;
- ``convex a``: a convex combination of the lists' scores, each scaled to 0-1 by the list's best
  and worst, the dense share ``a`` times its confidence;
- ``separation``: the shipped fusion (``documents.retrieval.fusion.fuse``, scores weighed by how
  clear each list is) replayed on the chunks (from lists saved with their keys), with the
  separation the embedder declares (its ``fusion_separation``; the shipped measure for lists
  saved before it was recorded); ``sep 5`` and ``sep floor 10`` with the shipped measure and
  with the one above the floor against rank 10, whatever the embedder; with ``--tune``, ``sep b
  s`` tries other ranks for its bottom (``b``) and its separation (``s``), ``sep floor b s`` the
  same above the floor.

A corpus run (ingest and one search per page: the slow part) can keep its lists with ``--save
FILE``; ``--lists FILE`` then replays every fusion from them in seconds, without Django, so a
setting can be tried and tried again. The file holds, per query, its language, the page it should
find, both lists (the chunks' keys, their pages and scores), the dense list's confidence and floor,
the embedder's name and its separation.

    .venv/bin/python bench/fusion_replay.py [--pages 300] [--max-chars 3000] [--source manuals|debian]
        [--save FILE]
    .venv/bin/python bench/fusion_replay.py --lists FILE
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.common import say
from bench.eval_corpus import CORPORA
from bench.retrieval_quality import LANGS, api_client, ingest, metrics, rank_of

Row = dict[str, Any]


def child(corpus_path: str, out: str) -> None:
    common.setup_django(dict(os.environ))
    common.migrate()
    import documents.search as search
    from documents.models import IndexEntry
    from documents.retrieval.fusion import SHIPPED

    corpus = [json.loads(line) for line in Path(corpus_path).read_text(encoding="utf-8").splitlines()]
    client = api_client()
    doc_page = ingest(client, corpus, "sqlite")
    from documents.embedders import configured_embedder

    embedder = configured_embedder()
    profile = dataclasses.asdict(getattr(embedder, "fusion_separation", SHIPPED))
    captured: dict[str, Any] = {}
    shipped = search.fuse

    def recording(lists: Any, k: int, **kwargs: Any) -> Any:
        captured["lists"] = {name: list(ranked) for name, ranked in lists.items()}
        captured["confidence"] = dict(kwargs.get("confidence") or {})
        captured["floors"] = {"lexical": 0.0, **(kwargs.get("floors") or {})}  # the search's own
        return shipped(lists, k, **kwargs)

    search.fuse = recording  # type: ignore[assignment]
    entry_page = {e.pk: doc_page.get(str(e.document_id), "?") for e in IndexEntry.objects.all()}
    rows = []
    for page in corpus:
        answer = client.get("/api/search", {"q": page["query"], "k": 40, "mode": "hybrid"}).json()
        rows.append(
            {
                "id": page["id"],
                "lang": page["lang"],
                "hybrid": [doc_page.get(h["document_id"], "?") for h in answer["results"]],
                "lists": {
                    name: [(entry_page.get(key, "?"), score) for key, score in ranked]
                    for name, ranked in captured["lists"].items()
                },
                # The chunks' own keys, so a replay can fuse chunks as the search does.
                "keys": {name: [key for key, _ in ranked] for name, ranked in captured["lists"].items()},
                "confidence": captured["confidence"],
                "floors": captured["floors"],
                "embedder": embedder.name,
                "separation": profile,
            }
        )
    Path(out).write_text(json.dumps(rows, ensure_ascii=False))


def _scaled(ranked: list[tuple[str, float]]) -> dict[str, float]:
    if not ranked:
        return {}
    scores = [s for _, s in ranked]
    top, bottom = max(scores), min(scores)
    out: dict[str, float] = {}
    for page, score in ranked:
        out[page] = max(out.get(page, 0.0), (score - bottom) / (top - bottom) if top > bottom else 1.0)
    return out


def rrf(row: Row, dense: float) -> list[str]:
    weights = {"lexical": 1.0, "semantic": dense * row["confidence"].get("semantic", 1.0)}
    fused: dict[str, float] = {}
    for name, ranked in row["lists"].items():
        pages = list(dict.fromkeys(page for page, _ in ranked))
        for rank, page in enumerate(pages, start=1):
            fused[page] = fused.get(page, 0.0) + weights[name] / (60 + rank)
    return sorted(fused, key=lambda p: -fused[p])


def convex(row: Row, share: float) -> list[str]:
    lexical, dense = _scaled(row["lists"].get("lexical", [])), _scaled(row["lists"].get("semantic", []))
    a = share * row["confidence"].get("semantic", 1.0)
    pages = list(dict.fromkeys([*lexical, *dense]))  # ties: full text's order (a set's is random)
    return sorted(pages, key=lambda p: -((1 - a) * lexical.get(p, 0.0) + a * dense.get(p, 0.0)))


def separation(row: Row, bottom: int | None = None, measure: Any = None) -> list[str]:
    """The shipped fusion (``documents.retrieval.fusion.fuse``) on the chunks, as the search
    runs it with the embedder's separation (recorded in the row); ``bottom`` tries another rank
    for the standing's 0, ``measure`` another :class:`~documents.retrieval.fusion.Separation`."""
    from documents.retrieval import fusion

    measure = measure or fusion.Separation(**row.get("separation", {}))
    saved = fusion.BOTTOM_RANK
    fusion.BOTTOM_RANK = bottom or saved
    try:
        pages = {
            key: page
            for name, ranked in row["lists"].items()
            for key, (page, _) in zip(row["keys"][name], ranked, strict=True)
        }
        lists = {
            name: [(key, score) for key, (_, score) in zip(row["keys"][name], ranked, strict=True)]
            for name, ranked in row["lists"].items()
        }
        fused = fusion.fuse(
            lists,
            1000,
            confidence=row["confidence"],
            floors=row.get("floors", {}),
            weights=fusion.Weights(),
            separation=measure,
        )
    finally:
        fusion.BOTTOM_RANK = saved
    return [pages[f.key] for f in fused]


def report(rows: list[Row], tune: bool = False) -> None:
    fusions: dict[str, Callable[[Row], list[str]]] = {
        "api hybrid": lambda r: r["hybrid"],
        "lexical": lambda r: [p for p, _ in r["lists"].get("lexical", [])],
        "semantic": lambda r: [p for p, _ in r["lists"].get("semantic", [])],
        **{f"rrf dense {w}": (lambda r, w=w: rrf(r, w)) for w in (1.0, 0.5, 0.25)},
        **{f"convex {a}": (lambda r, a=a: convex(r, a)) for a in (0.1, 0.2, 0.3, 0.5)},
    }
    if all("keys" in r for r in rows):
        from documents.retrieval.fusion import Separation

        fusions["separation"] = separation
        fusions["sep 5"] = lambda r: separation(r, measure=Separation())
        fusions["sep floor 10"] = lambda r: separation(r, measure=Separation(rank=10, above_floor=True))
        if tune:
            for bottom in (5, 10, 20):
                for against in (2, 3, 5, 10):
                    for above, label in ((False, "sep"), (True, "sep floor")):
                        m = Separation(rank=against, above_floor=above)
                        fusions[f"{label} {bottom} {against}"] = lambda r, b=bottom, m=m: separation(r, b, m)
    halves = {"all": rows, "even": rows[0::2], "odd": rows[1::2]}
    say(f"{'fusion':16} " + "  ".join(f"{h + ' ' + lang:>17}" for h in halves for lang in LANGS))
    for name, fusion in fusions.items():
        cells = []
        for subset in halves.values():
            for lang in LANGS:
                m = metrics([rank_of(r["id"], fusion(r)) for r in subset if r["lang"] == lang])
                cells.append(f"{m['recall@1']:.3f} / {m['mrr@10']:.3f}")
        say(f"{name:16} " + "  ".join(f"{c:>17}" for c in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=300, help="pages per language")
    parser.add_argument("--max-chars", type=int, default=3000)
    parser.add_argument(
        "--source", choices=CORPORA, default="manuals", help="the corpus (bench/eval_corpus.py)"
    )
    parser.add_argument("--lists", help="replay lists saved by an earlier run instead of ingesting")
    parser.add_argument("--save", help="keep this run's lists in this file (for --lists)")
    parser.add_argument("--tune", action="store_true", help="also try other ranks for the score fusion")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    common.header("Fusion replay (R@1 / MRR@10)")
    common.print_machine()
    if args.lists:
        rows = json.loads(Path(args.lists).read_text(encoding="utf-8"))
    else:
        from bench import eval_corpus

        pages = eval_corpus.build(args.pages, args.max_chars, source=args.source)
        with tempfile.TemporaryDirectory(prefix="bench-fusion-") as name:
            tmp = Path(name)
            corpus, out = tmp / "corpus.jsonl", tmp / "lists.json"
            corpus.write_text("\n".join(json.dumps(p, ensure_ascii=False) for p in pages), encoding="utf-8")
            throttles = {
                f"THROTTLE_{w}_{x}": "100000/min" for w in ("SEARCH", "UPLOAD") for x in ("USER", "IP")
            }
            env = common.base_env(
                settings="config.settings", database_url="", var_dir=tmp, Q_SYNC="1", **throttles
            )
            command = [common.PYTHON, __file__, "--child", str(corpus), str(out)]
            subprocess.run(command, env=env, cwd=common.ROOT, check=True)
            rows = json.loads(out.read_text())
        if args.save:
            Path(args.save).write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
            say(f"lists saved to {args.save}")
    report(rows, args.tune)


if __name__ == "__main__":
    main()
