"""Benchmark: the default embedder's speed, onnxruntime against today's numpy encoder, same answers
(bench/README.md, "Embedding model").

The chunks are real: pages of the retrieval-quality corpus (``bench/eval_corpus.py``: Debian's
PostgreSQL and Django manuals, LibreOffice and GIMP help in Chinese), cut by the platform's own
chunker for the model's window, each with its context header, exactly what the embedding stage
hands the model. Both runtimes are the ``local`` backend itself (``LocalModelEmbedder``), with
the deployed batch size.

- One thread: both encoders loaded in this process, one compute thread each. A pass embeds
  every chunk with each runtime, alternating the runtimes every 64 chunks (one embedding-stage
  batch; order flipped each time), so both meet the same load on a shared machine whose speed
  drifts within seconds; chunks/s per pass, medians, and the median of the passes' own ratios.
- Two processes: two workers' share of the machine, two processes of one thread each, both
  embedding every chunk in the same alternation, each slice started in both at once (a barrier);
  chunks/s = all chunks embedded by both / the sum of the slices' slower times.
- Same answers: cosine between the two runtimes' vectors of every chunk (min, mean), and MRR@10
  per search mode and language on the retrieval-quality benchmark, run once per runtime through
  ``bench/retrieval_quality.py``'s own configurations (``EMBEDDINGS_LOCAL_RUNTIME``).

Verdicts: onnx chunks/s >= 2x numpy's (one thread, and two processes); cosine min >= 0.99;
|MRR@10 onnx - numpy| <= 0.01 in every mode and language.

``--e5`` measures only the ``e5`` backend's two runtimes (onnxruntime on the package's weights,
and the package's C engine) beside the default model on onnxruntime, on the same chunks (cut for
the default model's window, so the same texts for all three), one thread and two processes as
above, the three alternated every slice; with the cosine of e5 onnx against the engine and their
token counts for every chunk. Verdicts: e5 onnx >= 2x the engine's chunks/s; cosine min >= 0.999.

``--batching`` measures only the batches ``encode_by_length`` cuts: each page's chunks (one
document, as the embedding stage embeds it) with the texts cut every ``batch_size`` as before,
and with ``length_batches``, alternated document by document; and a document of a 250-token and
a 62-token chunk, the case the length batches are for.

    .venv/bin/python bench/embed_speed.py [--quick] [--pages N] [--runs N]
        [--quality-backends sqlite,postgres,pgvector | --no-quality | --batching | --e5] [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.common import median, say

RUNTIMES = ("numpy", "onnx")
TODAY, NEW = RUNTIMES


def embedder_of(runtime: str) -> Any:
    """The ``local`` backend as deployed, one thread: numpy in batches of 8 as before this
    change, onnx with its own default batch size."""
    from documents.embedders.local import LocalModelEmbedder

    return LocalModelEmbedder(threads=1, runtime=runtime, batch_size=8 if runtime == TODAY else 0)


def real_chunks(pages: list[dict[str, str]]) -> list[str]:
    """What the embedding stage gives the model for these pages: the platform's chunks (the
    settings' default sizes, bounded by the model's window) with their context header."""
    return [text for document in real_documents(pages) for text in document]


def real_documents(
    pages: list[dict[str, str]], counter: Any = None, target: int = 350, maximum: int = 500
) -> list[list[str]]:
    """``real_chunks`` of each page apart: one uploaded document's chunks. ``counter``: the
    embedder whose tokens and window cut them (the default model's when None)."""
    from documents.engines.chunking import Block, ChunkInputPage, chunk_for_model, embedded_text

    counter = counter or embedder_of(TODAY)
    documents: list[list[str]] = []
    for n, page in enumerate(pages):
        title = f"p{n}.txt"  # as an upload through the API names it
        blocks = tuple(Block("paragraph", part) for part in page["text"].split("\n\n") if part.strip())
        chunks = chunk_for_model(
            [ChunkInputPage(number=1, blocks=blocks)],
            title=title,
            count=counter.count_tokens,
            window=counter.window,
            target_tokens=min(target, maximum),
            max_tokens=maximum,
        )
        documents.append([embedded_text(title, chunk.text) for chunk in chunks])
    return documents


# --- speed -------------------------------------------------------------------------------------

SLICE = 64  # texts per embed() call, as the embedding stage hands them over (EMBEDDING_BATCH_SIZE)


def timed_passes(
    embedders: dict[str, Any], texts: list[str], runs: int, barrier: Any = None
) -> dict[str, Any]:
    """``runs`` passes over ``texts``; each pass alternates the embedders slice by slice (order
    flipped every slice), so all see the same machine load even when it drifts within seconds
    (the machine is shared). Seconds per runtime per pass, per slice, and the last vectors.
    ``barrier`` (two processes) starts every slice in both processes at once."""
    names = list(embedders)
    vectors = {r: e.embed(texts[:4]) for r, e in embedders.items()}  # load + warm up
    seconds: dict[str, list[list[float]]] = {r: [] for r in names}
    out: dict[str, list[Any]] = {r: [] for r in names}
    for run in range(runs):
        for r in names:
            seconds[r].append([])
            out[r] = []
        for n, start in enumerate(range(0, len(texts), SLICE)):
            part = texts[start : start + SLICE]
            for r in names if (run + n) % 2 == 0 else reversed(names):
                if barrier is not None:
                    barrier.wait()
                began = time.perf_counter()
                out[r].append(embedders[r].embed(part))
                seconds[r][-1].append(time.perf_counter() - began)
    for r in names:
        vectors[r] = np.vstack(out[r])
    return {"seconds": seconds, "vectors": vectors}


def summary(count: int, seconds: dict[str, list[float]]) -> dict[str, Any]:
    """chunks/s per runtime per pass, their medians, and the median of the passes' own ratios."""
    rates = {r: [count / s for s in seconds[r]] for r in RUNTIMES}
    return {
        "rates": rates,
        "median": {r: median(rates[r]) for r in RUNTIMES},
        "ratio": median([n / t for t, n in zip(rates[TODAY], rates[NEW], strict=True)]),
    }


def one_thread(texts: list[str], runs: int) -> dict[str, Any]:
    found = timed_passes({r: embedder_of(r) for r in RUNTIMES}, texts, runs)
    result = summary(len(texts), {r: [sum(p) for p in found["seconds"][r]] for r in RUNTIMES})
    for run in range(runs):
        say(
            f"  pass {run + 1}: " + ", ".join(f"{r} {result['rates'][r][run]:.1f} chunks/s" for r in RUNTIMES)
        )
    cosines = (found["vectors"][TODAY] * found["vectors"][NEW]).sum(axis=1)
    return {**result, "cosine_min": float(cosines.min()), "cosine_mean": float(cosines.mean())}


def _worker(texts: list[str], runs: int, barrier: Any, queue: Any) -> None:
    found = timed_passes({r: embedder_of(r) for r in RUNTIMES}, texts, runs, barrier)
    queue.put(found["seconds"])


def in_step(worker: Any, texts: list[str], runs: int, names: Sequence[str]) -> dict[str, list[float]]:
    """Two ``worker`` processes, one thread each, both embedding every chunk, slice by slice in
    step (a barrier starts each slice in both): each name's wall time per pass, a slice's time
    being the slower worker's."""
    import multiprocessing

    spawn = multiprocessing.get_context("spawn")
    barrier, queue = spawn.Barrier(2), spawn.Queue()
    workers = [spawn.Process(target=worker, args=(texts, runs, barrier, queue)) for _ in range(2)]
    for process in workers:
        process.start()
    first, second = (queue.get(timeout=7200) for _ in workers)
    for process in workers:
        process.join()
    return {
        r: [
            sum(max(a, b) for a, b in zip(p, q, strict=True))
            for p, q in zip(first[r], second[r], strict=True)
        ]
        for r in names
    }


def two_processes(texts: list[str], runs: int) -> dict[str, Any]:
    """The runtimes in two processes in step (``in_step``)."""
    result = summary(2 * len(texts), in_step(_worker, texts, runs, RUNTIMES))
    for run in range(runs):
        say(
            f"  pass {run + 1}: " + ", ".join(f"{r} {result['rates'][r][run]:.1f} chunks/s" for r in RUNTIMES)
        )
    return result


# --- length batches ----------------------------------------------------------------------------


@contextlib.contextmanager
def fixed_batches() -> Iterator[None]:
    """``encode_by_length`` as it was before ``length_batches``: the texts sorted by length, cut
    every ``batch_size`` whatever their lengths (this benchmark's baseline only)."""
    from documents.embedders import bert_encoder

    def fixed(lengths: Any, batch_size: int) -> list[list[int]]:
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]

    length_batches = bert_encoder.length_batches
    bert_encoder.length_batches = fixed
    try:
        yield
    finally:
        bert_encoder.length_batches = length_batches


def batching(documents: list[list[str]], runs: int) -> dict[str, Any]:
    """Each document's chunks embedded in one ``encode`` call (onnx, one thread, its batches of
    2), fixed batches and length batches alternated document by document (order flipped each
    time); a document of a 250-token and a 62-token chunk timed the same way, 20 times a pass."""
    encoder = embedder_of(NEW).load()
    sentence = "The harbour office counted the boats and the weather of every week. "
    pair = [sentence * 19 + "Rain", sentence * 4 + "Then the tide came in at noon."]
    assert [len(e.ids) for e in encoder.tokenizer.encode_batch(pair)] == [250, 62]
    ways = {"fixed": fixed_batches, "length": contextlib.nullcontext}
    encoder.encode(pair)  # warm up
    seconds: dict[str, dict[str, list[float]]] = {w: {"corpus": [], "pair": []} for w in ways}
    per_document: dict[str, list[float]] = {w: [] for w in ways}
    for run in range(runs):
        totals = {w: 0.0 for w in ways}
        for n, texts in enumerate([*documents, *[pair] * 20]):
            for way in ways if (run + n) % 2 == 0 else reversed(list(ways)):
                with ways[way]():
                    began = time.perf_counter()
                    encoder.encode(texts)
                    spent = time.perf_counter() - began
                if n < len(documents):
                    totals[way] += spent
                    per_document[way].append(spent)
                else:
                    seconds[way]["pair"].append(spent)
        for way in ways:
            seconds[way]["corpus"].append(totals[way])
        say(
            f"  pass {run + 1}: "
            + ", ".join(f"{w} batches {len(documents) / totals[w]:.1f} documents/s" for w in ways)
        )
    return {"seconds": seconds, "per_document": per_document}


# --- answers -----------------------------------------------------------------------------------


def quality(pages: list[dict[str, str]], backends: str, tmp: Path) -> dict[str, Any]:
    """MRR@10 per configuration, mode and language for each runtime, through the retrieval-quality
    benchmark's own child processes (API upload, API search)."""
    from bench import retrieval_quality as rq

    corpus = tmp / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pages), encoding="utf-8")
    out: dict[str, Any] = {}
    for runtime in RUNTIMES:
        options = argparse.Namespace(backends=backends, embedders="local")
        work = tmp / runtime
        work.mkdir()
        for run in rq.configurations(options, work, corpus, extra_env={"EMBEDDINGS_LOCAL_RUNTIME": runtime}):
            out.setdefault(run["label"], {})[runtime] = {
                mode: {lang: rq.metrics(run["ranks"][mode][lang])["mrr@10"] for lang in rq.LANGS}
                for mode in rq.MODES
            }
    return out


def length_batching(documents: list[list[str]], runs: int, report: Any) -> None:
    counter = embedder_of(TODAY)
    tokens = [[counter.count_tokens(t) for t in d] for d in documents]
    mixed = sum(1 for d in tokens if len(d) > 1 and min(d) < 0.8 * max(min(counter.window, t) for t in d))
    say(
        f"corpus: {len(documents)} documents, {sum(map(len, documents))} chunks; {mixed} documents "
        "with a chunk under 0.8 of the longest"
    )
    common.header(f"fixed against length batches, onnx, one thread ({runs} passes, alternated per document)")
    found = batching(documents, runs)
    common.header("results")
    for what, unit in (("corpus", "s a pass"), ("pair", "ms, 250 + 62 tokens")):
        old, new = (median(found["seconds"][w][what]) for w in ("fixed", "length"))
        scale = 1000 if what == "pair" else 1
        say(f"{what:7} fixed {old * scale:.2f}, length {new * scale:.2f} {unit} ({new / old:.2f}x)")
        report.figures[f"{what}_fixed"], report.figures[f"{what}_length"] = old, new
    old, new = (median(found["per_document"][w]) * 1000 for w in ("fixed", "length"))
    say(f"a document, median: fixed {old:.1f} ms, length {new:.1f} ms")


# --- e5: onnxruntime against the package's C engine, beside the default model ---------------------

E5_EMBEDDERS = ("minilm onnx", "e5 onnx", "e5 engine")


def e5_embedders() -> dict[str, Any]:
    """The three as deployed, one compute thread each: the default model on onnxruntime, and the
    ``e5`` backend on each of its runtimes."""
    from documents.embedders.e5 import E5Embedder
    from documents.embedders.local import LocalModelEmbedder

    return {
        "minilm onnx": LocalModelEmbedder(threads=1, runtime="onnx"),
        "e5 onnx": E5Embedder(threads=1, runtime="onnx"),
        "e5 engine": E5Embedder(threads=1, runtime="engine"),
    }


def _e5_worker(texts: list[str], runs: int, barrier: Any, queue: Any) -> None:
    queue.put(timed_passes(e5_embedders(), texts, runs, barrier)["seconds"])


def e5_speed(texts: list[str], runs: int, report: Any) -> None:
    """chunks/s of the three on the same chunks, alternated every slice, in one process and in
    two; cosine and token counts of e5 onnx against the engine over every chunk."""
    embedders = e5_embedders()
    common.header(f"one thread, one process ({runs} passes, alternated every {SLICE} chunks)")
    say(f"load before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    found = timed_passes(embedders, texts, runs)
    single = {r: [len(texts) / sum(p) for p in found["seconds"][r]] for r in E5_EMBEDDERS}
    for run in range(runs):
        say(f"  pass {run + 1}: " + ", ".join(f"{r} {single[r][run]:.2f} chunks/s" for r in E5_EMBEDDERS))
    say(f"load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    ours, theirs = found["vectors"]["e5 onnx"], found["vectors"]["e5 engine"]
    cosines = (ours * theirs).sum(axis=1)
    e5 = embedders["e5 onnx"]
    counts = [e5.count_tokens(t) for t in texts]
    same = sum(a == embedders["e5 engine"].count_tokens(t) for a, t in zip(counts, texts, strict=True))

    common.header(f"two processes, one thread each ({runs} passes, alternated every {SLICE} chunks)")
    walls = in_step(_e5_worker, texts, runs, E5_EMBEDDERS)
    pair = {r: [2 * len(texts) / wall for wall in walls[r]] for r in E5_EMBEDDERS}
    for run in range(runs):
        say(f"  pass {run + 1}: " + ", ".join(f"{r} {pair[r][run]:.2f} chunks/s" for r in E5_EMBEDDERS))
    say(f"load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    common.header("results")
    say(f"e5 tokens per chunk: median {median(counts)}, max {max(counts)} (window {e5.window})")
    for label, rates in (("one thread", single), ("two processes", pair)):
        say(
            f"{label:14} "
            + ", ".join(f"{r} {median(rates[r]):.2f}" for r in E5_EMBEDDERS)
            + " chunks/s (medians)"
        )
        ratio = median([o / e for o, e in zip(rates["e5 onnx"], rates["e5 engine"], strict=True)])
        to_default = median([o / m for o, m in zip(rates["e5 onnx"], rates["minilm onnx"], strict=True)])
        say(f"{'':14} e5 onnx / e5 engine {ratio:.2f}x, e5 onnx / minilm onnx {to_default:.2f}x")
        report.figures[label] = {r: median(rates[r]) for r in E5_EMBEDDERS}
        report.check(f"chunks/s e5 onnx / e5 engine, {label}", ratio, 2.0, higher_is_better=True, unit="x")
    say(
        f"cosine e5 onnx vs e5 engine over {len(texts)} chunks: min {cosines.min():.5f}, "
        f"mean {cosines.mean():.5f}; token counts equal for {same} of {len(texts)}"
    )
    report.figures.update(
        cosine_min=float(cosines.min()), cosine_mean=float(cosines.mean()), counts_equal=same
    )
    report.check("cosine e5 onnx vs e5 engine, min", float(cosines.min()), 0.999, higher_is_better=True)
    report.check("token counts e5 onnx = e5 engine, chunks", same, len(texts), higher_is_better=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    common.common_args(parser)
    parser.add_argument("--pages", type=int, default=80, help="corpus pages per language (default 80)")
    parser.add_argument("--max-chars", type=int, default=3000, help="characters kept per page")
    parser.add_argument("--runs", type=int, default=5, help="alternated runs per measurement")
    parser.add_argument("--quality-backends", default="sqlite", help="databases of the MRR@10 comparison")
    parser.add_argument("--no-quality", action="store_true", help="speed and cosine only")
    parser.add_argument(
        "--batching", action="store_true", help="only fixed against length batches, per document (onnx)"
    )
    parser.add_argument(
        "--e5",
        action="store_true",
        help="only e5 on onnxruntime against its C engine, beside the default model",
    )
    args = parser.parse_args()
    if args.quick:
        args.pages, args.max_chars, args.runs = (
            min(args.pages, 30),
            min(args.max_chars, 1500),
            min(args.runs, 3),
        )
    from bench import eval_corpus

    common.header(
        "Embedding: fixed against length batches (local, onnx)"
        if args.batching
        else "Embedding speed: e5 on onnxruntime vs its C engine, and the default model (onnx)"
        if args.e5
        else "Embedding speed: onnxruntime vs today's numpy encoder (local, all-MiniLM-L6-v2)"
    )
    common.print_machine()
    report = common.Report("embed_speed")
    pages = eval_corpus.build(args.pages, args.max_chars)
    if not pages:
        raise SystemExit("no corpus: install the documentation packages (see bench/eval_corpus.py)")
    if args.batching:
        length_batching(real_documents(pages), args.runs, report)
        report.print()
        report.dump(args.json)
        return
    texts = real_chunks(pages)
    if args.e5:
        say(f"corpus: {len(pages)} pages -> {len(texts)} chunks (cut for the default model's window)")
        e5_speed(texts, args.runs, report)
        report.print()
        report.dump(args.json)
        return
    counter = embedder_of(TODAY)
    tokens = sorted(counter.count_tokens(t) for t in texts)
    say(
        f"corpus: {len(pages)} pages -> {len(texts)} chunks, tokens median {median(tokens)}, "
        f"max {tokens[-1]} (window {counter.window})"
    )
    report.figures.update(pages=len(pages), chunks=len(texts), tokens_median=median(tokens))

    common.header(f"one thread, one process ({args.runs} passes, runtimes alternated every {SLICE} chunks)")
    single = one_thread(texts, args.runs)
    report.figures["one_thread"] = single
    common.header(f"two processes, one thread each ({args.runs} passes, alternated every {SLICE} chunks)")
    pair = two_processes(texts, args.runs)
    report.figures["two_processes"] = pair
    with tempfile.TemporaryDirectory(prefix="bench-embed-") as tmp_name:
        tmp = Path(tmp_name)
        answers: dict[str, Any] = {}
        if not args.no_quality:
            common.header(f"retrieval quality, MRR@10 ({args.quality_backends}), each runtime")
            answers = quality(pages, args.quality_backends, tmp)
            report.figures["mrr@10"] = answers

    common.header("results")
    for label, figures in (("one thread", single), ("two processes", pair)):
        say(
            f"{label:14} numpy {figures['median'][TODAY]:.1f} chunks/s, onnx {figures['median'][NEW]:.1f} "
            f"chunks/s (medians of {args.runs} passes); median of the passes' ratios {figures['ratio']:.2f}x"
        )
    say(
        f"cosine onnx vs numpy over {len(texts)} chunks: "
        f"min {single['cosine_min']:.7f}, mean {single['cosine_mean']:.7f}"
    )
    report.check("chunks/s onnx / numpy, one thread", single["ratio"], 2.0, higher_is_better=True, unit="x")
    report.check("chunks/s onnx / numpy, two processes", pair["ratio"], 2.0, higher_is_better=True, unit="x")
    report.check("cosine onnx vs numpy, min", single["cosine_min"], 0.99, higher_is_better=True)
    for label, by_runtime in answers.items():
        if set(by_runtime) != set(RUNTIMES):
            report.notes.append(f"{label}: a runtime's quality run failed")
            continue
        for mode, langs in by_runtime[NEW].items():
            for lang, mrr in langs.items():
                before = by_runtime[TODAY][mode][lang]
                say(f"{label:16} {mode:9} {lang}: MRR@10 numpy {before:.3f}, onnx {mrr:.3f}")
                report.check(
                    f"{label} {mode} {lang} |MRR@10 onnx - numpy|",
                    abs(mrr - before),
                    0.01,
                    higher_is_better=False,
                )
    report.print()
    report.dump(args.json)


if __name__ == "__main__":
    main()
