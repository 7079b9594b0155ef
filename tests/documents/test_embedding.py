"""The hashing embedder, the local concurrency limiter, Retry-After parsing and the factory."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured

from documents.embedders import Embedder, get_embedder
from documents.embedders.hashing import HashingEmbedder
from documents.embedders.http import HttpEmbedder, LocalLimiter, parse_retry_after
from jobs.errors import StageFailure
from tests.timing import hold_for

ROOT = Path(__file__).resolve().parents[2]
TEXTS = [
    "How do I reset my account password?",
    "Steps to reset the password of your account",
    "Quarterly revenue grew in the Asian market",
    "如何重置账户密码",
    "重置密码的步骤",
    "第三季度亚洲市场收入增长",
]


def cosine(embedder: Embedder, a: str, b: str) -> float:
    vectors = embedder.embed([a, b])
    return float(vectors[0] @ vectors[1])


def test_vectors_are_float32_unit_length_rows() -> None:
    vectors = HashingEmbedder(dimension=256).embed(TEXTS)

    assert vectors.shape == (len(TEXTS), 256)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)


def test_text_without_features_gives_a_zero_row() -> None:
    vectors = HashingEmbedder().embed(["", " \n", "!!! ---", "word"])

    assert np.count_nonzero(vectors[:3]) == 0
    assert np.linalg.norm(vectors[3]) == pytest.approx(1.0)


def test_embedding_nothing_gives_an_empty_matrix() -> None:
    assert HashingEmbedder(dimension=64).embed([]).shape == (0, 64)


def test_same_text_gives_the_same_vector_in_another_process() -> None:
    # A different PYTHONHASHSEED changes str hashes; the embedder must not depend on them.
    script = (
        "import sys; from documents.embedders.hashing import HashingEmbedder; "
        f"sys.stdout.buffer.write(HashingEmbedder(512).embed({TEXTS!r}).tobytes())"
    )
    outputs = [
        subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            env={"PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    ]

    local = HashingEmbedder(512).embed(TEXTS).tobytes()
    assert outputs[0] == outputs[1] == local


def test_hashing_is_pinned_so_stored_vectors_stay_comparable() -> None:
    # If this fails, the feature hashing changed: bump HashingEmbedder.VERSION (stored vectors differ).
    vector = HashingEmbedder(dimension=32).embed(["hello world"])[0]

    # Three features (hello, world, "hello world"), each weight 1 before normalising.
    assert {int(i): round(float(vector[i]), 4) for i in np.flatnonzero(vector)} == {
        4: 0.5774,
        22: 0.5774,
        27: -0.5774,
    }


def test_similar_english_texts_score_higher_than_unrelated_ones() -> None:
    embedder = HashingEmbedder()

    related = cosine(embedder, TEXTS[0], TEXTS[1])
    unrelated = cosine(embedder, TEXTS[0], TEXTS[2])

    # Lexical: only "reset", "account" and "password" are shared, and the bigrams differ.
    assert related > 0.15
    assert related > unrelated + 0.15


def test_similar_chinese_texts_score_higher_than_unrelated_ones() -> None:
    embedder = HashingEmbedder()

    related = cosine(embedder, TEXTS[3], TEXTS[4])
    unrelated = cosine(embedder, TEXTS[3], TEXTS[5])

    assert related > 0.3
    assert related > unrelated + 0.2


def test_chinese_character_order_matters_through_bigrams() -> None:
    embedder = HashingEmbedder()

    same_characters_other_order = cosine(embedder, "北京大学图书馆", "图书馆大学北京")

    # The characters are the same; the bigrams across the reordered words (学图 / 馆大, 学北) differ.
    assert 0.5 < same_characters_other_order < 0.95


def test_case_and_full_width_forms_do_not_matter() -> None:
    embedder = HashingEmbedder()

    full_width = "Invoice ＡＢＣ１２３"  # noqa: RUF001 (as typed with a Chinese input method)

    assert cosine(embedder, full_width, "invoice abc123") == pytest.approx(1.0)


def test_name_identifies_the_vector_space() -> None:
    assert HashingEmbedder(dimension=1024).name != HashingEmbedder(dimension=512).name


# --- LocalLimiter -------------------------------------------------------------------------------


def test_limiter_raises_rate_limited_when_no_slot_frees_in_time() -> None:
    limiter = LocalLimiter(1, wait_seconds=0.05, retry_after=3)

    with limiter.slot("provider"):
        started = time.monotonic()
        with pytest.raises(StageFailure) as failure, limiter.slot("provider"):
            pass
        waited = time.monotonic() - started

    assert failure.value.cause == "embedding_rate_limited"
    assert failure.value.retry_after == 3
    assert waited >= 0.05


def test_limiter_counts_each_provider_separately() -> None:
    limiter = LocalLimiter(1, wait_seconds=0.05)

    with limiter.slot("provider-a"), limiter.slot("provider-b"):
        pass


def test_limiter_frees_the_slot_when_the_call_fails() -> None:
    limiter = LocalLimiter(1, wait_seconds=0.05)

    with pytest.raises(RuntimeError), limiter.slot("provider"):
        raise RuntimeError("call failed")

    with limiter.slot("provider"):
        pass


def test_limiter_bounds_concurrent_holders() -> None:
    limiter = LocalLimiter(2, wait_seconds=5)
    lock = threading.Lock()
    holding, most = 0, 0

    def work() -> None:
        nonlocal holding, most
        with limiter.slot("provider"):
            with lock:
                holding += 1
                most = max(most, holding)
            hold_for(0.02)  # a call in flight
            with lock:
                holding -= 1

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert most == 2


# --- Retry-After --------------------------------------------------------------------------------


def test_retry_after_in_seconds() -> None:
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after("-3") == 0.0


def test_retry_after_as_http_date() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)

    assert parse_retry_after("Wed, 01 Jan 2025 12:02:00 GMT", now=now) == 120.0
    assert parse_retry_after("Wed, 01 Jan 2025 11:00:00 GMT", now=now) == 0.0


def test_retry_after_absent_or_garbled_is_none() -> None:
    assert parse_retry_after(None) is None
    assert parse_retry_after("") is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("inf") is None


# --- factory ------------------------------------------------------------------------------------


def test_factory_builds_hashing_when_asked(settings) -> None:
    # The default is the local model (tests/documents/test_embedding_model.py); hashing stays available.
    settings.EMBEDDINGS_BACKEND = "hashing"

    embedder = get_embedder()

    assert isinstance(embedder, HashingEmbedder)
    assert embedder.dimension == 1024


def test_factory_follows_the_setting_and_options(settings) -> None:
    settings.EMBEDDINGS_BACKEND = "http"
    settings.EMBEDDINGS_HTTP_BASE_URL = "http://127.0.0.1:9/v1"
    settings.EMBEDDINGS_HTTP_MODEL = "text-embedding-test"

    embedder = get_embedder(batch_size=5)

    assert isinstance(embedder, HttpEmbedder)
    assert (embedder.model, embedder.batch_size) == ("text-embedding-test", 5)
    assert isinstance(embedder.limiter, LocalLimiter)
    assert get_embedder("hashing", dimension=128).dimension == 128
    embedder.close()


def test_factory_rejects_an_unknown_backend() -> None:
    with pytest.raises(ImproperlyConfigured, match="unknown EMBEDDINGS_BACKEND"):
        get_embedder("word2vec")


def test_http_backend_without_a_url_is_a_configuration_error(settings) -> None:
    settings.EMBEDDINGS_HTTP_BASE_URL = ""

    with pytest.raises(ImproperlyConfigured):
        get_embedder("http")


def test_sentence_transformers_without_the_package_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # as when it is not installed

    with pytest.raises(ImproperlyConfigured, match="sentence-transformers package"):
        get_embedder("sentence-transformers")
