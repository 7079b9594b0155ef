"""The HTTP embedder against a real OpenAI-compatible server on 127.0.0.1, scripted per URL path.

The base URL's first path segment picks the server's behaviour: ``/ok/v1``, ``/throttled/v1``...
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from documents.embedders.http import HttpEmbedder, LocalLimiter
from jobs.errors import StageFailure
from tests.conftest import serve_in_thread
from tests.timing import hold_for

API_KEY = "sk-test-5ecret-KEY-0123456789"
DIMENSION = 8


def expected_vector(text: str) -> list[float]:
    """What the fake provider answers for ``text``: deterministic and deliberately not normalised."""
    return [float(len(text)), 1.0, *[float(ord(c) % 7) for c in text[: DIMENSION - 2].ljust(DIMENSION - 2)]]


Reply = tuple[int, Any, dict[str, str]]


class Provider(ThreadingHTTPServer):
    """Records requests, and per scenario the highest number of requests in flight at once."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), ProviderHandler)
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.in_flight: Counter[str] = Counter()
        self.max_in_flight: Counter[str] = Counter()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class ProviderHandler(BaseHTTPRequestHandler):
    server: Provider

    def do_POST(self) -> None:
        scenario = self.path.strip("/").split("/")[0]
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            self.server.in_flight[scenario] += 1
            self.server.max_in_flight[scenario] = max(
                self.server.max_in_flight[scenario], self.server.in_flight[scenario]
            )
        try:
            status, payload, headers = self.answer(scenario, body["input"])
        finally:
            # Counted out before replying: once the client has its answer it may send the next call.
            with self.server.lock:
                self.server.in_flight[scenario] -= 1
        self.reply(status, payload, headers)

    def answer(self, scenario: str, texts: list[str]) -> Reply:
        if scenario in ("ok", "slow-ok"):
            if scenario == "slow-ok":
                hold_for(0.1)  # a slow provider
            data = [
                {"object": "embedding", "index": i, "embedding": expected_vector(t)}
                for i, t in enumerate(texts)
            ]
            return 200, {"object": "list", "data": data[::-1], "model": "m"}, {}  # any order: index decides
        if scenario == "throttled":
            return 429, {"error": {"message": "Rate limit reached"}}, {"Retry-After": "7"}
        if scenario == "throttled-until":
            return 429, {"error": "slow down"}, {"Retry-After": formatdate(time.time() + 120, usegmt=True)}
        if scenario == "unavailable":
            return 503, {"error": "maintenance"}, {"Retry-After": "30"}
        if scenario == "unauthorized":
            # Some providers and proxies echo the credential they rejected.
            return 401, {"error": f"Incorrect API key provided: {self.headers['Authorization']}"}, {}
        if scenario == "forbidden":
            return 403, {"error": "model not allowed for this key"}, {}
        if scenario == "bad-request":
            return 400, {"error": "input too long"}, {}
        if scenario == "hangs":
            hold_for(1.5)  # a provider that hangs past the client timeout
            return 200, {"data": []}, {}
        if scenario == "garbage":
            return 200, "<html>gateway</html>", {}
        if scenario == "short":
            return 200, {"data": [{"index": 0, "embedding": [1.0] * DIMENSION}]}, {}
        if scenario == "broken":
            return 500, {"error": "internal"}, {}
        return 404, {"error": f"no scenario {scenario!r} in this test server"}, {}

    def reply(self, status: int, payload: Any, headers: dict[str, str]) -> None:
        raw = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        with contextlib.suppress(OSError):  # the client gave up (timeout test): nobody to answer
            self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:  # keep the test output clean
        pass


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    server = Provider()
    serve_in_thread(server)
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def make_embedder(provider: Provider) -> Iterator[Any]:
    made: list[HttpEmbedder] = []

    def make(scenario: str, **options: Any) -> HttpEmbedder:
        options = {"limiter": LocalLimiter(4), "api_key": API_KEY, "timeout": 5.0, **options}
        embedder = HttpEmbedder(
            base_url=f"{provider.url}/{scenario}/v1", model="text-embedding-test", **options
        )
        made.append(embedder)
        return embedder

    yield make
    for embedder in made:
        embedder.close()


def failure_of(embedder: HttpEmbedder, texts: tuple[str, ...] = ("some text",)) -> StageFailure:
    with pytest.raises(StageFailure) as raised:
        embedder.embed(texts)
    failure = raised.value
    for shown in (str(failure), failure.detail, repr(failure)):
        assert API_KEY not in shown
    return failure


def test_vectors_come_back_normalised_in_input_order(make_embedder, provider: Provider) -> None:
    texts = ["alpha", "beta gamma", "delta", "epsilon zeta eta", "theta"]
    provider.requests.clear()

    vectors = make_embedder("ok", batch_size=2).embed(texts)

    expected = np.array([expected_vector(t) for t in texts], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(vectors, expected, rtol=1e-6)
    assert vectors.dtype == np.float32
    assert [request["body"]["input"] for request in provider.requests] == [texts[0:2], texts[2:4], texts[4:]]
    request = provider.requests[0]
    assert request["path"] == "/ok/v1/embeddings"
    assert request["body"]["model"] == "text-embedding-test"
    assert request["headers"]["Authorization"] == f"Bearer {API_KEY}"


def test_dimension_is_learned_from_the_first_answer(make_embedder) -> None:
    embedder = make_embedder("ok")

    embedder.embed(["one"])

    assert embedder.dimension == DIMENSION


def test_dimension_other_than_configured_is_a_provider_error(make_embedder) -> None:
    failure = failure_of(make_embedder("ok", dimension=1536))

    assert failure.cause == "embedding_provider_down"
    assert "1536" in failure.detail


def test_429_is_rate_limited_with_retry_after_seconds(make_embedder) -> None:
    failure = failure_of(make_embedder("throttled"))

    assert failure.cause == "embedding_rate_limited"
    assert failure.retry_after == 7.0
    assert "429" in failure.detail


def test_429_with_an_http_date_retry_after(make_embedder) -> None:
    failure = failure_of(make_embedder("throttled-until"))

    assert failure.cause == "embedding_rate_limited"
    assert failure.retry_after is not None
    assert 115 <= failure.retry_after <= 121


@pytest.mark.parametrize("scenario", ["unavailable", "broken"])
def test_server_errors_mean_the_provider_is_down(make_embedder, scenario: str) -> None:
    failure = failure_of(make_embedder(scenario))

    assert failure.cause == "embedding_provider_down"


def test_503_passes_on_its_retry_after(make_embedder) -> None:
    assert failure_of(make_embedder("unavailable")).retry_after == 30.0


@pytest.mark.parametrize(("scenario", "status"), [("unauthorized", "401"), ("forbidden", "403")])
def test_rejected_credentials_are_an_auth_failure(make_embedder, scenario: str, status: str) -> None:
    failure = failure_of(make_embedder(scenario))

    assert failure.cause == "embedding_auth"
    assert failure.retry_after is None
    assert status in failure.detail


def test_echoed_api_key_is_redacted_from_the_detail(make_embedder) -> None:
    failure = failure_of(make_embedder("unauthorized"))

    assert "Incorrect API key provided: Bearer [redacted]" in failure.detail


def test_other_client_errors_are_reported_with_their_detail(make_embedder) -> None:
    failure = failure_of(make_embedder("bad-request"))

    assert failure.cause == "embedding_provider_down"
    assert "400" in failure.detail
    assert "input too long" in failure.detail


def test_closed_port_is_a_network_failure(make_embedder) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago and has no listener now
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    embedder = HttpEmbedder(
        base_url=f"http://127.0.0.1:{port}/v1", model="m", api_key=API_KEY, limiter=LocalLimiter(1)
    )

    failure = failure_of(embedder)
    embedder.close()

    assert failure.cause == "embedding_provider_down"
    assert "ConnectError" in failure.detail


def test_timeout_is_a_provider_failure(make_embedder) -> None:
    started = time.monotonic()

    failure = failure_of(make_embedder("hangs", timeout=0.3))

    assert failure.cause == "embedding_provider_down"
    assert "0.3s" in failure.detail
    assert time.monotonic() - started < 1.4, (
        "the client must give up at its timeout, not when the server answers"
    )


@pytest.mark.parametrize("scenario", ["garbage", "short"])
def test_malformed_answers_are_provider_failures(make_embedder, scenario: str) -> None:
    failure = failure_of(make_embedder(scenario), ("first", "second"))

    assert failure.cause == "embedding_provider_down"


def test_no_request_is_sent_without_a_free_slot(make_embedder, provider: Provider) -> None:
    limiter = LocalLimiter(1, wait_seconds=0.1, retry_after=4)
    embedder = make_embedder("ok", limiter=limiter)
    provider.requests.clear()

    with limiter.slot(embedder.provider_key):
        failure = failure_of(embedder)

    assert failure.cause == "embedding_rate_limited"
    assert failure.retry_after == 4
    assert provider.requests == []


def run_concurrently(provider: Provider, make_embedder, limiter: LocalLimiter) -> int:
    """Six workers, each with its own embedder (as separate processes would be), share ``limiter``."""
    provider.max_in_flight["slow-ok"] = 0
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            make_embedder("slow-ok", limiter=limiter, batch_size=2).embed([f"text {n} {i}" for i in range(6)])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    return provider.max_in_flight["slow-ok"]


def test_concurrent_calls_per_provider_stay_within_the_limit(make_embedder, provider: Provider) -> None:
    assert run_concurrently(provider, make_embedder, LocalLimiter(2, wait_seconds=20)) == 2


def test_without_a_tight_limit_the_server_sees_more_concurrent_calls(
    make_embedder, provider: Provider
) -> None:
    # The control for the test above: the server really can see more than two calls at once.
    assert run_concurrently(provider, make_embedder, LocalLimiter(6)) > 2


def test_provider_key_carries_no_credentials() -> None:
    embedder = HttpEmbedder(
        base_url="https://user:pa55word@api.example.test/v1/?key=abc", model="m", limiter=LocalLimiter(1)
    )

    assert embedder.provider_key == "https://api.example.test/v1"
    embedder.close()
