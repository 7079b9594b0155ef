"""Benchmark aid: the retrieval-quality corpus's full-text ranking replayed in plain Python, to
test one change at a time (bench/README.md, "Why Chinese lexical ranked below BM25").

The corpus of ``bench/eval_corpus.py``, each page cut by the platform's chunker with the
configured embedder's tokenizer (titled ``p<i>.txt`` as ``retrieval_quality.py`` uploads it),
indexed and queried by ``search_text`` and ``query_tokens``, every chunk scored by Okapi BM25 with
the common-term cut (``backends.scoring_terms``, as both databases apply it), a page by its best
chunk. No database and no search API: the same figures as the lexical rows of
``retrieval_quality.py`` in seconds (this replay gave them exactly), and variants it cannot
run: k1, b, query characters as ``bm25s`` does, whole pages, sums of chunks, other lengths.

    .venv/bin/python bench/retrieval_replay.py [--pages N] [--max-chars N]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.common import say
from bench.retrieval_quality import LANGS, bm25_ranks, bm25_tokens, metrics, rank_of


@dataclass
class Entry:
    page: str
    terms: Counter[str]
    length: int


class Replay:
    """BM25 over ``entries`` (chunks or whole pages); a page is scored by its best entry (or
    the sum of its entries')."""

    def __init__(self, entries: list[Entry]) -> None:
        self.entries = entries
        self.df: Counter[str] = Counter()
        for entry in entries:
            self.df.update(entry.terms.keys())
        self.average = sum(e.length for e in entries) / len(entries)
        lengths: dict[str, list[int]] = defaultdict(list)
        for entry in entries:
            lengths[entry.page].append(entry.length)
        self.page_mean = {page: sum(v) / len(v) for page, v in lengths.items()}

    def rank(
        self,
        tokens: list[str],
        *,
        k1: float = 1.2,
        b: float = 0.75,
        cut: bool = True,
        total: bool = False,
        length: Callable[[Replay, Entry], float] | None = None,
    ) -> list[str]:
        from documents.retrieval.backends import scoring_terms

        n = len(self.entries)
        if cut:
            scoring = scoring_terms(n, dict(self.df), tokens)
        else:
            scoring = [
                (t, math.log(1 + (n - self.df[t] + 0.5) / (self.df[t] + 0.5))) for t in tokens if self.df[t]
            ]
        pages: dict[str, float] = {}
        for entry in self.entries:
            size = length(self, entry) if length else entry.length
            norm = k1 * (1 - b + b * size / self.average)
            score = sum(
                w * entry.terms[t] * (k1 + 1) / (entry.terms[t] + norm) for t, w in scoring if entry.terms[t]
            )
            if score:
                pages[entry.page] = (
                    pages.get(entry.page, 0.0) + score if total else max(pages.get(entry.page, 0), score)
                )
        return sorted(pages, key=lambda p: (-pages[p], p))[:10]


def query_characters_too(query: str) -> list[str]:
    """``query_tokens`` with each CJK run's single characters as well (as ``bm25s`` is queried)."""
    from documents.retrieval.text import _CJK_RUN, _TOKEN, _cjk_grams, _normalise, without_stop_words

    seen: dict[str, None] = {}
    for token in _TOKEN.findall(_normalise(query)):
        for gram in _cjk_grams(token, unigrams=True) if _CJK_RUN.fullmatch(token) else [token]:
            seen.setdefault(gram, None)
    return without_stop_words(list(seen))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=100, help="pages per language")
    parser.add_argument("--max-chars", type=int, default=3000)
    args = parser.parse_args()
    from bench import eval_corpus

    common.header("Retrieval replay (full text, in Python)")
    pages = eval_corpus.build(args.pages, args.max_chars)
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as var:
        common.setup_django(common.base_env(settings="config.settings", database_url="", var_dir=Path(var)))
        os.environ.pop("DATABASE_URL", None)
        from documents.embedders import configured_embedder
        from documents.engines.chunking import Block, ChunkInputPage, chunk_for_model, embedded_text
        from documents.retrieval.text import query_tokens, search_text

        embedder = configured_embedder()
        chunks: list[Entry] = []
        whole: list[Entry] = []
        for i, page in enumerate(pages):
            title = f"p{i}.txt"
            cut = chunk_for_model(
                [ChunkInputPage(1, (Block("paragraph", page["text"]),))],
                title=title,
                count=embedder.count_tokens,
                window=embedder.window,
            )
            texts = [search_text(embedded_text(title, c.text)).split() for c in cut]
            chunks.extend(Entry(page["id"], Counter(t), len(t)) for t in texts)
            joined = [t for text in texts for t in text]
            whole.append(Entry(page["id"], Counter(joined), len(joined)))
    say(f"corpus: {len(pages)} pages, {len(chunks)} chunks ({embedder.name})")
    by_chunk, by_page = Replay(chunks), Replay(whole)

    def line(
        name: str, replay: Replay, tokens: Callable[[str], list[str]] = query_tokens, **options: object
    ) -> None:
        ranks: dict[str, list[int | None]] = {lang: [] for lang in LANGS}
        for page in pages:
            ranks[page["lang"]].append(rank_of(page["id"], replay.rank(tokens(page["query"]), **options)))  # type: ignore[arg-type]
        say(
            f"{name:58} "
            + "  ".join(
                f"{lang} {metrics(r)['recall@1']:.3f} / {metrics(r)['mrr@10']:.3f}"
                for lang, r in ranks.items()
            )
        )

    bm25 = bm25_ranks(pages)
    say(
        f"{'bm25s over pages (retrieval_quality.py baseline)':58} "
        + "  ".join(
            f"{lang} {metrics(bm25[lang])['recall@1']:.3f} / {metrics(bm25[lang])['mrr@10']:.3f}"
            for lang in LANGS
        )
    )
    line(
        "pages, bm25s tokens, k1 1.5, no cut, one index for both",
        Replay([Entry(p["id"], Counter(bm25_tokens(p["text"])), len(bm25_tokens(p["text"]))) for p in pages]),
        bm25_tokens,
        k1=1.5,
        cut=False,
    )
    for name, replay in (("pages", by_page), ("chunks", by_chunk)):
        line(f"{name}, platform tokens, k1 1.2, b 0.75", replay)
        line(f"{name}, (a) query characters and bigrams", replay, query_characters_too)
        line(f"{name}, (a) k1 1.5", replay, k1=1.5)
        line(f"{name}, (c) no common-term cut", replay, cut=False)
    line("chunks, (b) a page by the sum of its chunks", by_chunk, total=True)
    for b in (0.5, 0.3, 0.1, 0.0):
        line(f"chunks, b {b}", by_chunk, b=b)
    line("chunks, length floored at the average", by_chunk, length=lambda r, e: max(e.length, r.average))
    line("chunks, length = the page's mean chunk length", by_chunk, length=lambda r, e: r.page_mean[e.page])


if __name__ == "__main__":
    main()
