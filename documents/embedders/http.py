"""The ``http`` backend: any OpenAI-compatible ``POST {base_url}/embeddings`` endpoint (production).

The HTTP embedder classifies provider failures into the causes of ``jobs.errors`` and bounds its
concurrent calls per provider through a :class:`ConcurrencyLimiter`, which a deployment backs by
the database so the bound holds across all worker processes.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

import httpx
import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from documents.causes import EMBEDDING_AUTH, EMBEDDING_PROVIDER_DOWN, EMBEDDING_RATE_LIMITED
from documents.embedders.base import Vectors, normalise_rows
from documents.embedders.registry import register
from jobs.errors import StageFailure

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
        window: int = 512,
    ) -> None:
        if not base_url or not model:
            raise ImproperlyConfigured("the HTTP embedder needs a base URL and a model name")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if window < 32:
            raise ValueError("window must be at least 32")
        self.window = window
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

    def count_tokens(self, text: str) -> int:
        """An estimate, never below what common tokenizers make of ``text``: the provider's
        tokenizer is not at hand. BPE and WordPiece vocabularies spend a token on about four
        bytes of English and on about one CJK character (three bytes); one per three UTF-8 bytes,
        plus two special tokens, stays above both."""
        return -(-len(text.encode("utf-8", "replace")) // 3) + 2

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
        return normalise_rows(matrix)

    def _down(self, detail: str) -> StageFailure:
        return StageFailure(EMBEDDING_PROVIDER_DOWN.code, self._scrub(f"{self.provider_key}: {detail}"))

    def _scrub(self, text: str) -> str:
        # Providers and proxies sometimes echo the credential back in an error body.
        return text.replace(self._api_key, "[redacted]") if self._api_key else text


# --- factory ------------------------------------------------------------------------------------


def build(**options: Any) -> HttpEmbedder:
    """An HTTP embedder from the ``EMBEDDINGS_HTTP_*`` settings (``options`` override them); its
    limiter is this process's unless ``limiter=`` is given."""
    http_options: dict[str, Any] = {
        "base_url": settings.EMBEDDINGS_HTTP_BASE_URL,
        "model": settings.EMBEDDINGS_HTTP_MODEL,
        "api_key": settings.EMBEDDINGS_HTTP_API_KEY,
        "dimension": settings.EMBEDDINGS_HTTP_DIMENSION or None,
        "batch_size": settings.EMBEDDINGS_HTTP_BATCH_SIZE,
        "timeout": settings.EMBEDDINGS_HTTP_TIMEOUT,
        "window": settings.EMBEDDINGS_HTTP_WINDOW,
        **options,
    }
    if "limiter" not in http_options:
        http_options["limiter"] = process_limiter()
    return HttpEmbedder(**http_options)


def configured() -> HttpEmbedder:
    """The deployment's HTTP embedder: its concurrency bound holds across every worker process."""
    # Imported here: the limiter's table is a model, and this package loads without Django apps.
    from documents.limiter import DatabaseLimiter

    limiter = DatabaseLimiter(max_concurrency=settings.EMBEDDINGS_HTTP_MAX_CONCURRENCY)
    return build(limiter=limiter)


register("http", build, configured=configured)
