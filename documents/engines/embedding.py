"""Embedders: texts in, float32 L2-normalised vectors out, behind one small protocol.

- ``local`` (default): all-MiniLM-L6-v2 from a pip package, run in-process without torch and
  without network. See :mod:`documents.engines.local_model`.
- ``hashing``: a lexical embedder with no model and no network. See :class:`HashingEmbedder`.
- ``http``: any OpenAI-compatible ``POST {base_url}/embeddings`` endpoint (production).
- ``sentence-transformers``: a local model, when that optional package is installed.

An embedder's ``name`` identifies its vector space (backend, model, dimension): vectors with
different names must never be compared, and a change of name means the index needs re-embedding.

The HTTP embedder classifies provider failures into the causes of ``jobs.errors`` and bounds its
concurrent calls per provider through a :class:`ConcurrencyLimiter`, which a deployment backs by
the database so the bound holds across all worker processes.
"""

# long-module: the embedder protocol and its three backends (hashing, HTTP, local model), each
# small; they share the normalisation and the failure classification.

from __future__ import annotations

import hashlib
import itertools
import math
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Protocol, runtime_checkable

import httpx
import numpy as np
import numpy.typing as npt
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from documents.causes import EMBEDDING_AUTH, EMBEDDING_PROVIDER_DOWN, EMBEDDING_RATE_LIMITED
from jobs.errors import StageFailure

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to vectors of one fixed space."""

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    # The cosine at or under which a neighbour shares nothing with the query for this model:
    # search drops such dense candidates (never a full-text match).
    similarity_floor: float

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Shape ``(len(texts), dimension)``, float32; each row has unit L2 norm, or is all zeros
        when the text has nothing to embed."""
        ...


def _normalise_rows(matrix: npt.NDArray[Any]) -> Vectors:
    vectors = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    # A zero row stays zero: there is no direction to keep, and dividing would make NaNs.
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


# --- hashing ------------------------------------------------------------------------------------

_HAN_KANA_HANGUL = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f"
_CJK_RUN = re.compile(rf"[{_HAN_KANA_HANGUL}]+")
_WORD = re.compile(rf"[^\W_{_HAN_KANA_HANGUL}]+")


class HashingEmbedder:
    """Signed feature hashing of words and characters: lexical, not semantic.

    Features are lowercased word unigrams and bigrams, and, for Chinese, Japanese and Korean
    script (written without spaces), character unigrams and bigrams. Each feature is hashed with
    BLAKE2b (stable across processes, unlike the salted built-in ``hash``) to a column and a sign,
    weighted ``1 + log(count)``. Texts that share words score high; synonyms and paraphrases with
    no common words do not, and words that collide in the hash add a little noise. It is fast,
    needs no model, and gives a search that works offline.
    """

    VERSION = 1  # bump when features or hashing change: it changes the vector space

    similarity_floor = 0.05  # a cosine this low is a hash collision, not a shared word

    def __init__(self, dimension: int = 1024) -> None:
        if dimension < 16:
            raise ValueError("dimension must be at least 16")
        self._dimension = dimension

    @property
    def name(self) -> str:
        return f"hashing-v{self.VERSION}-{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``; see :class:`Embedder`."""
        matrix = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, count in _features(text).items():
                column, sign = self._slot(feature)
                matrix[row, column] += sign * (1.0 + math.log(count))
        return _normalise_rows(matrix)

    def _slot(self, feature: str) -> tuple[int, float]:
        digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
        # The lowest bit picks the sign, so colliding features cancel out on average instead of adding up.
        return (digest >> 1) % self._dimension, 1.0 if digest & 1 else -1.0


def _features(text: str) -> Counter[str]:
    # NFKC folds full-width Latin and digits (common in Chinese text) onto their ASCII forms.
    text = unicodedata.normalize("NFKC", text).casefold()
    features: Counter[str] = Counter()
    words = _WORD.findall(text)
    features.update(f"w:{word}" for word in words)
    features.update(f"b:{a} {b}" for a, b in itertools.pairwise(words))
    for run in _CJK_RUN.findall(text):
        features.update(f"c:{char}" for char in run)
        features.update(f"cc:{run[i : i + 2]}" for i in range(len(run) - 1))
    return features


# --- concurrency limits for remote providers ----------------------------------------------------


class ConcurrencyLimiter(Protocol):
    """Bounds the number of concurrent calls to one provider.

    ``slot(provider_key)`` is a context manager held for the duration of one call. It waits a
    bounded time for a free slot and, when none frees up, raises
    ``StageFailure("embedding_rate_limited", retry_after=<seconds>)`` so the job backs off instead
    of holding a worker. The slot is released when the block exits, by return or exception. A
    cross-process implementation must also free the slots of a process that died (e.g. leases
    that expire). ``provider_key`` names the provider (e.g. its base URL); never a credential.
    """

    def slot(self, provider_key: str) -> AbstractContextManager[None]: ...


class LocalLimiter:
    """A :class:`ConcurrencyLimiter` for one process: one semaphore per provider key."""

    def __init__(self, max_concurrency: int, *, wait_seconds: float = 30.0, retry_after: float = 5.0) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.max_concurrency = max_concurrency
        self.wait_seconds = wait_seconds
        self.retry_after = retry_after
        self._semaphores: dict[str, threading.BoundedSemaphore] = {}
        self._lock = threading.Lock()

    @contextmanager
    def slot(self, provider_key: str) -> Iterator[None]:
        """Hold one of the provider's slots; see :class:`ConcurrencyLimiter`."""
        with self._lock:  # two threads creating the first semaphore for a key must share one
            semaphore = self._semaphores.setdefault(
                provider_key, threading.BoundedSemaphore(self.max_concurrency)
            )
        if not semaphore.acquire(timeout=self.wait_seconds):
            raise StageFailure(
                EMBEDDING_RATE_LIMITED.code,
                f"all {self.max_concurrency} embedding slots stayed busy for {self.wait_seconds:g}s",
                retry_after=self.retry_after,
            )
        try:
            yield
        finally:
            semaphore.release()


_process_limiter: LocalLimiter | None = None
_process_limiter_lock = threading.Lock()


def process_limiter() -> LocalLimiter:
    """The process-wide :class:`LocalLimiter`, sized by ``EMBEDDINGS_HTTP_MAX_CONCURRENCY``."""
    global _process_limiter
    with _process_limiter_lock:
        if _process_limiter is None:
            _process_limiter = LocalLimiter(settings.EMBEDDINGS_HTTP_MAX_CONCURRENCY)
        return _process_limiter


# --- OpenAI-compatible HTTP ---------------------------------------------------------------------


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from an HTTP ``Retry-After`` value (seconds or an HTTP-date); None if absent or bad."""
    if not value or not value.strip():
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:  # RFC 9110 dates are GMT; a naive parse means the zone was "-0000"
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(seconds, 0.0)


class HttpEmbedder:
    """Embeddings from an OpenAI-compatible API: ``POST {base_url}/embeddings``.

    ``base_url`` includes the version path, as OpenAI clients expect (``https://host/v1``). Texts
    go in batches of ``batch_size``, each call inside one ``limiter`` slot. Errors become
    ``StageFailure`` with causes ``embedding_rate_limited`` (429, with the provider's Retry-After),
    ``embedding_auth`` (401/403) or ``embedding_provider_down`` (5xx, other 4xx, network errors,
    timeouts, malformed answers). The API key is sent only in the Authorization header and is
    scrubbed from every error message.
    """

    similarity_floor = 0.0  # unknown model: no floor unless SEARCH_MIN_SCORE sets one

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        limiter: ConcurrencyLimiter,
        api_key: str | None = None,
        dimension: int | None = None,
        batch_size: int = 64,
        timeout: float = 30.0,
    ) -> None:
        if not base_url or not model:
            raise ImproperlyConfigured("the HTTP embedder needs a base URL and a model name")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        url = httpx.URL(base_url.rstrip("/"))
        self.model = model
        self.limiter = limiter
        self.batch_size = batch_size
        self.timeout = timeout
        self._api_key = api_key or None
        self._dimension = dimension
        self._endpoint = f"{base_url.rstrip('/')}/embeddings"
        # Identifies the provider in limiter rows and messages: no user info, query or credential.
        port = f":{url.port}" if url.port else ""
        self.provider_key = f"{url.scheme}://{url.host}{port}{url.path.rstrip('/')}"
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        self._client = httpx.Client(headers=headers, timeout=timeout)

    @property
    def name(self) -> str:
        return f"http-{self.model}"

    @property
    def dimension(self) -> int:
        """The configured dimension, or the one the provider answered with; unknown before either."""
        if self._dimension is None:
            raise ImproperlyConfigured("embedding dimension unknown: set EMBEDDINGS_HTTP_DIMENSION")
        return self._dimension

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` in batches; see :class:`Embedder` and the class docstring for errors."""
        batches = [
            self._embed_batch(list(texts[start : start + self.batch_size]))
            for start in range(0, len(texts), self.batch_size)
        ]
        if not batches:
            return np.zeros((0, self._dimension or 0), dtype=np.float32)
        return np.vstack(batches)

    def _embed_batch(self, texts: list[str]) -> Vectors:
        with self.limiter.slot(self.provider_key):
            try:
                response = self._client.post(
                    self._endpoint, json={"model": self.model, "input": texts, "encoding_format": "float"}
                )
            except httpx.TimeoutException as exc:
                raise self._down(f"no answer within {self.timeout:g}s ({type(exc).__name__})") from exc
            except httpx.HTTPError as exc:
                raise self._down(f"network error: {type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            raise self._classify(response)
        return self._vectors(response, len(texts))

    def _classify(self, response: httpx.Response) -> StageFailure:
        status = response.status_code
        detail = f"HTTP {status} from {self.provider_key}: {self._scrub(response.text[:300])}"
        retry_after = parse_retry_after(response.headers.get("Retry-After"))
        if status == 429:
            return StageFailure(EMBEDDING_RATE_LIMITED.code, detail, retry_after=retry_after)
        if status in (401, 403):
            return StageFailure(EMBEDDING_AUTH.code, detail)
        # 5xx is an outage; any other 4xx (bad model name, wrong URL, input too long) is a
        # configuration or request problem no cause describes better: the detail tells the operator.
        return StageFailure(EMBEDDING_PROVIDER_DOWN.code, detail, retry_after=retry_after)

    def _vectors(self, response: httpx.Response, expected: int) -> Vectors:
        try:
            items = sorted(response.json()["data"], key=lambda item: item["index"])
            matrix = np.asarray([item["embedding"] for item in items], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise self._down(f"malformed embeddings response: {type(exc).__name__}") from exc
        if matrix.ndim != 2 or matrix.shape[0] != expected:
            raise self._down(f"expected {expected} embeddings, got an array of shape {matrix.shape}")
        if self._dimension is None:
            self._dimension = int(matrix.shape[1])
        elif matrix.shape[1] != self._dimension:
            raise self._down(f"expected dimension {self._dimension}, the provider answered {matrix.shape[1]}")
        return _normalise_rows(matrix)

    def _down(self, detail: str) -> StageFailure:
        return StageFailure(EMBEDDING_PROVIDER_DOWN.code, self._scrub(f"{self.provider_key}: {detail}"))

    def _scrub(self, text: str) -> str:
        # Providers and proxies sometimes echo the credential back in an error body.
        return text.replace(self._api_key, "[redacted]") if self._api_key else text


# --- sentence-transformers ----------------------------------------------------------------------


class SentenceTransformerEmbedder:
    """A local ``sentence-transformers`` model (optional: ``pip install sentence-transformers``).

    Loading the model takes seconds and hundreds of MB: build one per process and reuse it.
    """

    similarity_floor = 0.0  # any model: no floor unless SEARCH_MIN_SCORE sets one

    def __init__(self, model_name: str, *, device: str = "cpu", batch_size: int = 32) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ImproperlyConfigured(
                "EMBEDDINGS_BACKEND='sentence-transformers' needs the sentence-transformers package "
                "(and torch); install them or choose the 'hashing' or 'http' backend"
            ) from exc
        self.model_name = model_name
        self.batch_size = batch_size
        self._model = SentenceTransformer(model_name, device=device)
        # Asked of the model itself: the name of the dimension accessor changed across major versions.
        self._dimension = int(np.asarray(self._model.encode(["dimension probe"])).shape[1])

    @property
    def name(self) -> str:
        return f"st-{self.model_name}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` with the local model; see :class:`Embedder`."""
        if not texts:
            return np.zeros((0, self._dimension), dtype=np.float32)
        matrix = self._model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True)
        return _normalise_rows(matrix)


# --- factory ------------------------------------------------------------------------------------

BACKENDS = ("local", "hashing", "http", "sentence-transformers")


def get_embedder(name: str | None = None, **options: Any) -> Embedder:
    """The embedder for backend ``name`` (default: the ``EMBEDDINGS_BACKEND`` setting).

    ``options`` override the settings-derived constructor arguments, e.g. ``limiter=`` for ``http``.
    """
    backend = name or settings.EMBEDDINGS_BACKEND
    if backend == "local":
        from documents.engines.local_model import LocalModelEmbedder

        return LocalModelEmbedder(
            **{
                "threads": settings.EMBEDDINGS_LOCAL_THREADS,
                "batch_size": settings.EMBEDDINGS_LOCAL_BATCH_SIZE,
                **options,
            }
        )
    if backend == "hashing":
        return HashingEmbedder(**{"dimension": settings.EMBEDDINGS_HASHING_DIMENSION, **options})
    if backend == "http":
        http_options: dict[str, Any] = {
            "base_url": settings.EMBEDDINGS_HTTP_BASE_URL,
            "model": settings.EMBEDDINGS_HTTP_MODEL,
            "api_key": settings.EMBEDDINGS_HTTP_API_KEY,
            "dimension": settings.EMBEDDINGS_HTTP_DIMENSION or None,
            "batch_size": settings.EMBEDDINGS_HTTP_BATCH_SIZE,
            "timeout": settings.EMBEDDINGS_HTTP_TIMEOUT,
            **options,
        }
        if "limiter" not in http_options:
            http_options["limiter"] = process_limiter()
        return HttpEmbedder(**http_options)
    if backend == "sentence-transformers":
        model = settings.EMBEDDINGS_ST_MODEL
        return SentenceTransformerEmbedder(**{"model_name": model, **options})
    raise ImproperlyConfigured(f"unknown EMBEDDINGS_BACKEND {backend!r}; choose one of {', '.join(BACKENDS)}")
