"""The retry policy is pure: every branch is checked without a database or a clock."""

import random

import pytest

from documents.causes import EMBEDDING_AUTH, EMBEDDING_RATE_LIMITED, OCR_TIMEOUT, PARSE_TIMEOUT
from jobs.errors import UserAction, get_cause
from jobs.retry import RetryRule, backoff_delay, decide


def test_no_automatic_retry_when_the_rule_allows_one_attempt():
    assert decide(EMBEDDING_AUTH.rule, 1).retry is False


def test_retries_until_the_attempt_limit_then_gives_up():
    rule = RetryRule(max_attempts=3, base_delay=1)
    assert decide(rule, 1).retry
    assert decide(rule, 2).retry
    assert not decide(rule, 3).retry


def test_parse_timeout_is_retried_exactly_once():
    assert decide(PARSE_TIMEOUT.rule, 1).retry
    assert not decide(PARSE_TIMEOUT.rule, 2).retry


def test_a_failed_sandbox_waits_and_is_retried_twice_not_counted_as_the_files_failure():
    """The parsing sandbox's servers ended on the worker: the platform's fault, retried after a
    pause like an unreachable service (not ``resource_limit``, whose retry is the file's)."""
    cause = get_cause("sandbox_failed")
    assert cause.code == "sandbox_failed" and cause.transient and cause.action is UserAction.WAIT
    assert [decide(cause.rule, attempt).retry for attempt in (1, 2, 3)] == [True, True, False]
    delays = [backoff_delay(cause.rule, attempt, random.Random(attempt)) for attempt in range(1, 8)]
    assert 5 <= delays[0] <= 10 and max(delays) <= 120


def test_backoff_grows_exponentially_within_jitter_bounds():
    rule = RetryRule(max_attempts=10, base_delay=2, factor=2, max_delay=1000)
    rng = random.Random(7)
    for attempt, ceiling in [(1, 2), (2, 4), (3, 8), (4, 16)]:
        for _ in range(50):
            delay = backoff_delay(rule, attempt, rng)
            assert ceiling / 2 <= delay <= ceiling


def test_backoff_is_capped_at_max_delay():
    rule = RetryRule(max_attempts=50, base_delay=2, max_delay=30)
    assert all(backoff_delay(rule, 40, random.Random(i)) <= 30 for i in range(20))


def test_jitter_spreads_simultaneous_failures():
    rule = RetryRule(max_attempts=5, base_delay=10)
    delays = {round(backoff_delay(rule, 2, random.Random(seed)), 3) for seed in range(20)}
    assert len(delays) > 10


def test_retry_after_is_a_floor():
    decision = decide(EMBEDDING_RATE_LIMITED.rule, 1, retry_after=42, rng=random.Random(1))
    assert decision.retry
    assert decision.delay >= 42


def test_retry_after_cannot_park_a_job_beyond_max_delay():
    decision = decide(EMBEDDING_RATE_LIMITED.rule, 1, retry_after=10**9)
    assert decision.delay == EMBEDDING_RATE_LIMITED.rule.max_delay


def test_ocr_timeout_first_halves_the_batch_then_switches_engine_then_gives_up():
    first = decide(OCR_TIMEOUT.rule, 1)
    second = decide(OCR_TIMEOUT.rule, 2)
    assert first.hints == {"batch_size": "halve"}
    assert second.hints == {"batch_size": "halve", "ocr_engine": "alternative"}
    assert not decide(OCR_TIMEOUT.rule, 3).retry


@pytest.mark.parametrize(
    ("code", "retryable_by_user", "automatic"),
    [
        ("encrypted_input", False, False),
        ("corrupt_input", False, False),
        ("embedding_auth", False, False),
        ("embedding_provider_down", True, True),
        ("index_write_failed", True, True),
        ("internal_error", True, True),
    ],
)
def test_causes_follow_the_design_table(code, retryable_by_user, automatic):
    cause = get_cause(code)
    assert cause.user_retryable is retryable_by_user
    assert decide(cause.rule, 1).retry is automatic
