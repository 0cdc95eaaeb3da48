"""The dispatcher's pure rules: what is announced, the queue filter, how attempts are
classified, and when they are retried."""

from __future__ import annotations

import pytest

from mainframe import parsers
from mainframe.hooks import policy
from mainframe.hooks.policy import Attempt, AttemptResult
from mainframe.lifecycle.retry_after import retry_after_seconds
from mainframe.lifecycle.rules import DeadLetterReason
from mainframe.lifecycle.scans import EndpointRevoked, ScanDeadLettered, ScanReady, ScanRef

NOW = 1_790_000_000_000_000


def ref(verified: bool) -> ScanRef:
    return ScanRef(1, 1, "pypi", "default", "pkg", "1", "scan", verified, "feed", NOW)


def test_only_verified_ready_and_dead_letters_are_announced() -> None:
    ready = ScanReady(ref(True), 1, NOW)
    dead = ScanDeadLettered(ref(True), DeadLetterReason.LEASE_EXPIRED, 3, "w", NOW, NOW, None)
    assert policy.announced(ready) is ready
    assert policy.announced(dead) is dead
    assert policy.announced(ScanReady(ref(False), 1, NOW)) is None
    assert policy.announced(EndpointRevoked(1, "pypi", 40)) is None


def test_queue_filter() -> None:
    assert policy.admits(None, "npm")
    assert policy.admits("npm", "npm")
    assert not policy.admits("npm", "default")


@pytest.mark.parametrize(
    ("status", "result", "retryable"),
    [
        (200, AttemptResult.OK, False),
        (204, AttemptResult.OK, False),
        (301, AttemptResult.REDIRECT, False),
        (302, AttemptResult.REDIRECT, False),
        (400, AttemptResult.CLIENT_ERROR, False),
        (401, AttemptResult.CLIENT_ERROR, False),
        (404, AttemptResult.CLIENT_ERROR, False),
        (408, AttemptResult.CLIENT_ERROR, True),
        (429, AttemptResult.RATELIMITED, True),
        (500, AttemptResult.SERVER_ERROR, True),
        (503, AttemptResult.SERVER_ERROR, True),
    ],
)
def test_statuses_classify_and_retry(status: int, result: AttemptResult, retryable: bool) -> None:
    attempt = policy.from_status(status, None, now_us=NOW)
    assert attempt.result is result
    assert attempt.retryable is retryable


@pytest.mark.parametrize(
    ("result", "retryable"),
    [
        (AttemptResult.TIMEOUT, True),
        (AttemptResult.CONNECT_ERROR, True),
        (AttemptResult.TRANSPORT_ERROR, True),
        (AttemptResult.REFUSED, False),
    ],
)
def test_transport_outcomes_retry_except_refusal(result: AttemptResult, retryable: bool) -> None:
    assert Attempt(result).retryable is retryable


def test_retry_after_in_seconds_and_as_an_http_date() -> None:
    assert retry_after_seconds("7", now_us=NOW) == 7.0
    assert retry_after_seconds(None, now_us=NOW) is None
    assert retry_after_seconds("soon", now_us=NOW) is None
    # NOW is 2026-09-21T14:13:20Z; the date is 30 s later.
    assert retry_after_seconds("Mon, 21 Sep 2026 14:13:50 GMT", now_us=NOW) == 30.0
    assert policy.from_status(429, "12", now_us=NOW).retry_after == 12.0
    assert policy.from_status(400, "12", now_us=NOW).retry_after is None


def test_a_retry_after_in_the_past_means_no_wait_and_garbage_the_backoff() -> None:
    past = policy.from_status(503, "Mon, 21 Sep 2026 14:00:00 GMT", now_us=NOW)
    assert policy.next_delay(past, number=1, backoff=(1.0, 5.0), draw=0.5) == 0.0
    negative = policy.from_status(429, "-3", now_us=NOW)
    assert policy.next_delay(negative, number=1, backoff=(1.0, 5.0), draw=0.5) == 0.0
    garbage = policy.from_status(429, "1e3", now_us=NOW)
    assert garbage.retry_after is None
    assert policy.next_delay(garbage, number=1, backoff=(1.0, 5.0), draw=0.5) == 1.0


def test_backoff_is_about_one_then_five_seconds_with_jitter() -> None:
    failed = Attempt(AttemptResult.SERVER_ERROR, 503)
    backoff = (1.0, 5.0)
    low = [policy.next_delay(failed, number=n, backoff=backoff, draw=0.0) for n in (1, 2)]
    high = [policy.next_delay(failed, number=n, backoff=backoff, draw=0.999999) for n in (1, 2)]
    assert low == [0.75, 3.75]
    assert high[0] == pytest.approx(1.25) and high[1] == pytest.approx(6.25)
    assert policy.next_delay(failed, number=3, backoff=backoff, draw=0.5) is None


def test_retry_after_is_honoured_up_to_sixty_seconds() -> None:
    asked = Attempt(AttemptResult.RATELIMITED, 429, retry_after=9.0)
    assert policy.next_delay(asked, number=1, backoff=(1.0, 5.0), draw=0.5) == 9.0
    greedy = Attempt(AttemptResult.RATELIMITED, 429, retry_after=3600.0)
    assert policy.next_delay(greedy, number=1, backoff=(1.0, 5.0), draw=0.5) == 60.0


def test_no_retry_after_success_a_4xx_a_redirect_or_a_refusal() -> None:
    for attempt in (
        Attempt(AttemptResult.OK, 200),
        Attempt(AttemptResult.CLIENT_ERROR, 400),
        Attempt(AttemptResult.REDIRECT, 302),
        Attempt(AttemptResult.REFUSED),
    ):
        assert policy.next_delay(attempt, number=1, backoff=(1.0,), draw=0.5) is None


@pytest.mark.parametrize("text", ["", "a", "1,-1", "nan", "1,2,3,4,5", "301"])
def test_bad_backoff_settings_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parsers.parse_backoff(text)


def test_backoff_setting_parses() -> None:
    assert parsers.parse_backoff("1,5") == (1.0, 5.0)
    assert parsers.parse_backoff("0") == (0.0,)
