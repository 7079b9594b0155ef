"""Benchmark aid: the retrieval-quality corpus's full-text ranking replayed in plain Python, to
test one change at a time (bench/README.md, "Why Chinese lexical ranked below BM25").

The corpus of ``bench/eval_corpus.py``, each page cut by the platform's chunker with the
configured embedder's tokenizer (titled ``p<i>.txt`` as ``retrieval_quality.py`` uploads it),
indexed and queried by ``search_text`` and ``query_tokens``, every chunk scored by Okapi BM25 with
the common-term cut (``backends.scoring_terms``, as both databases apply it), a page by its best
chunk. No database and no search API: the same figures as the lexical rows of
``retrieval_quality.py`` in seconds (this replay gave them exactly), and variants it cannot
run: k1, b, query characters as ``bm25s`` does, whole pages, sums of chunks, other lengths.
``--document``: the platform's ranking (b 0) beside variants that give a chunk a bounded share of
its document's evidence (``DOCUMENT_VARIANTS``), each at a few weights, with the figures of the
even and odd halves of the queries (a weight is fitted on the even half), the last counting once
what every chunk of a document holds (all of it, whether title or not) or its title alone (as the
databases rank: ``backends.PAGE_WEIGHT``);
``REPLAY_ONLY=<part of a variant's name>`` runs the variants so named only.

    .venv/bin/python bench/retrieval_replay.py [--pages N] [--max-chars N] [--source debian] [--document]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
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
    # The words of the document's title that open this entry's text (each chunk's text repeats
    # them; the platform keeps them per version, ``DocumentVersion.search_title``).
    title: Counter[str] = field(default_factory=Counter)


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
        self.page_length = {page: sum(v) for page, v in lengths.items()}
        self.page_average = sum(self.page_length.values()) / len(self.page_length)
        self.page_chunks = {page: len(v) for page, v in lengths.items()}
        self.chunks_average = len(entries) / len(self.page_chunks)
        # Each page's title, and its length with the title counted once (not once per chunk).
        self.page_title = {entry.page: entry.title for entry in entries}
        self.page_length_once = {
            page: total - (self.page_chunks[page] - 1) * self.page_title[page].total()
            for page, total in self.page_length.items()
        }
        self.page_average_once = sum(self.page_length_once.values()) / len(self.page_length_once)

    def rank(
        self,
        tokens: list[str],
        *,
        k1: float = 1.2,
        b: float = 0.75,
        cut: bool = True,
        total: bool = False,
        length: Callable[[Replay, Entry], float] | None = None,
        document: Callable[[list[float], float], float] | None = None,
        document_b: float = 0.0,
        document_length: str = "all",
        shared_once: bool = False,
        title_once: bool = False,
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
        scores: dict[str, list[float]] = defaultdict(list)  # each page's matching entries' scores
        tf: dict[str, Counter[str]] = defaultdict(Counter)  # each page's scoring terms, summed
        matching: Counter[str] = Counter()  # each page's matching entries' lengths, summed
        holding: dict[str, Counter[str]] = defaultdict(Counter)  # entries holding each term
        least: dict[str, dict[str, int]] = defaultdict(dict)  # the fewest times one holds it
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
                scores[entry.page].append(score)
                matching[entry.page] += entry.length
                tf[entry.page].update({t: entry.terms[t] for t, _ in scoring if entry.terms[t]})
                for t, _ in scoring:
                    if entry.terms[t]:
                        holding[entry.page][t] += 1
                        least[entry.page][t] = min(least[entry.page].get(t, entry.terms[t]), entry.terms[t])
        if document is not None:
            # The page's best entry with a share of its other evidence: the variants of
            # "a chunk's score gets a bounded share of its document's" (step by ``document``).
            for page, found in scores.items():
                found.sort(reverse=True)
                # The page's length against the average page's: all its entries' words, its
                # matching entries' words, or its number of entries.
                share = {
                    "all": self.page_length[page] / self.page_average,
                    "matching": matching[page] / self.page_average,
                    "chunks": self.page_chunks[page] / self.chunks_average,
                    "title once": self.page_length_once[page] / self.page_average_once,
                }[document_length]
                norm = k1 * (1 - document_b + document_b * share)
                if shared_once:
                    # Occurrences every entry of the page holds (its title, repeated in each
                    # chunk's text) count once: not once per chunk.
                    for t, count in holding[page].items():
                        if count == self.page_chunks[page]:
                            tf[page][t] -= (count - 1) * least[page][t]
                if title_once:
                    # The title counted once: each of the page's matching entries but one less
                    # its title's count (what the databases rank by, ``backends.PAGE_WEIGHT``).
                    title = self.page_title[page]
                    for t in list(tf[page]):
                        tf[page][t] -= (len(found) - 1) * title[t]
                whole = sum(
                    w * tf[page][t] * (k1 + 1) / (tf[page][t] + norm) for t, w in scoring if tf[page][t]
                )
                pages[page] = document(found, whole)
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
    parser.add_argument("--source", choices=("manuals", "debian"), default="manuals", help="the corpus")
    parser.add_argument(
        "--document",
        action="store_true",
        help="only the platform's ranking (b 0) and the variants giving a chunk a share of its "
        "document's evidence, each at a few weights, fitted on the even half of the queries",
    )
    args = parser.parse_args()
    args.halves = args.document
    from bench import eval_corpus

    common.header("Retrieval replay (full text, in Python)")
    pages = eval_corpus.build(args.pages, args.max_chars, source=args.source)
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as var:
        common.setup_django(common.base_env(settings="config.settings", database_url="", var_dir=Path(var)))
        os.environ.pop("DATABASE_URL", None)
        from documents.embedders import configured_embedder
        from documents.engines.chunking import Block, ChunkInputPage, chunk_for_model, embedded_text
        from documents.retrieval.text import query_tokens, search_text
        from documents.stages.chunk import chunk_sizes

        embedder = configured_embedder()
        # The sizes the chunk stage cuts by: the settings' bounded by the embedder's own.
        target, maximum, _ = chunk_sizes(None, [embedder])
        chunks: list[Entry] = []
        whole: list[Entry] = []
        for i, page in enumerate(pages):
            title = f"p{i}.txt"
            cut = chunk_for_model(
                [ChunkInputPage(1, (Block("paragraph", page["text"]),))],
                title=title,
                count=embedder.count_tokens,
                window=embedder.window,
                target_tokens=target,
                max_tokens=maximum,
            )
            texts = [search_text(embedded_text(title, c.text)).split() for c in cut]
            # What each chunk's text opens with (the title, unless the text starts with it).
            opening = Counter(search_text(title).split())
            chunks.extend(Entry(page["id"], Counter(t), len(t), opening) for t in texts)
            joined = [t for text in texts for t in text]
            whole.append(Entry(page["id"], Counter(joined), len(joined)))
    say(f"corpus: {len(pages)} pages, {len(chunks)} chunks ({embedder.name})")
    by_chunk, by_page = Replay(chunks), Replay(whole)

    def line(
        name: str, replay: Replay, tokens: Callable[[str], list[str]] = query_tokens, **options: object
    ) -> dict[str, list[float]]:
        ranks: dict[str, list[int | None]] = {lang: [] for lang in LANGS}
        for page in pages:
            ranks[page["lang"]].append(rank_of(page["id"], replay.rank(tokens(page["query"]), **options)))  # type: ignore[arg-type]
        figures = {
            lang: [metrics(r)["mrr@10"], metrics(r[0::2])["mrr@10"], metrics(r[1::2])["mrr@10"]]
            for lang, r in ranks.items()
        }
        say(
            f"{name:58} "
            + "  ".join(
                f"{lang} {metrics(r)['recall@1']:.3f} / {metrics(r)['mrr@10']:.3f}"
                + (f" (even {figures[lang][1]:.3f}, odd {figures[lang][2]:.3f})" if args.halves else "")
                for lang, r in ranks.items()
            )
        )
        return figures

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
    if args.document:
        document_variants(line, by_chunk, by_page, os.environ.get("REPLAY_ONLY", ""))
        return
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


# How a page's matching chunks' scores (best first) and its document-level BM25 (the chunks' term
# counts summed) make the page's score, each with its weight: the best chunk plus ...
DOCUMENT_VARIANTS: dict[str, Callable[[float], Callable[[list[float], float], float]]] = {
    # ... a share of the best of the document's other matching chunks
    "+ w * next best chunk": lambda w: lambda s, d: s[0] + w * (s[1] if len(s) > 1 else 0.0),
    # ... w per e-fold of the document's other matching chunks
    "+ w * log(1 + other matching chunks)": lambda w: lambda s, d: s[0] + w * math.log(len(s)),
    # ... a share of the sum of the others (unbounded: rewards long documents)
    "+ w * sum of the other chunks": lambda w: lambda s, d: s[0] + w * sum(s[1:]),
    # ... mixed with the document's BM25 over its chunks' summed term counts
    "(1 - w) * best + w * document BM25": lambda w: lambda s, d: (1 - w) * s[0] + w * d,
}
WEIGHTS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0)


def document_variants(
    line: Callable[..., dict[str, list[float]]], by_chunk: Replay, by_page: Replay, only: str = ""
) -> None:
    """The platform's ranking (b 0, a page by its best chunk), whole pages, and each variant of
    ``DOCUMENT_VARIANTS`` at each weight; per variant the weight best on the even half of the
    queries (both languages' MRR@10 summed) is named with its odd-half figures."""
    base = line("chunks, b 0 (the platform)", by_chunk, b=0.0)
    line("pages, b 0", by_page, b=0.0)
    line("pages, b 0.75", by_page)
    mixed = DOCUMENT_VARIANTS["(1 - w) * best + w * document BM25"]
    for name, variant, document_b, document_length in [
        *((name, variant, 0.0, "all") for name, variant in DOCUMENT_VARIANTS.items()),
        ("(1 - w) * best + w * document BM25 with b 0.75", mixed, 0.75, "all"),
        ("... b 0.75, the document's length its matching chunks'", mixed, 0.75, "matching"),
        ("... b 0.75, the document's length its number of chunks", mixed, 0.75, "chunks"),
        ("... b 0.75, what every chunk holds counted once", mixed, 0.75, "once"),
        ("... b 0.75, the document's title counted once", mixed, 0.75, "title once"),
    ]:
        if only and only not in name:
            continue
        fitted = []
        for weight in WEIGHTS:
            figures = line(
                f"chunks, b 0, {name}, w {weight}",
                by_chunk,
                b=0.0,
                document=variant(weight),
                document_b=document_b,
                document_length="all" if document_length == "once" else document_length,
                shared_once=document_length == "once",
                title_once=document_length == "title once",
            )
            fitted.append((sum(f[1] for f in figures.values()), weight, figures))
        _, weight, figures = max(fitted, key=lambda f: (f[0], -f[1]))
        say(
            f"  fitted on the even half: w {weight}; against the platform: "
            + "  ".join(
                f"{lang} all {f[0] - base[lang][0]:+.4f} even {f[1] - base[lang][1]:+.4f}"
                f" odd {f[2] - base[lang][2]:+.4f}"
                for lang, f in figures.items()
            )
        )


if __name__ == "__main__":
    main()
