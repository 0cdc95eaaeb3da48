"""Token buckets over a fake clock."""

from __future__ import annotations

from mainframe.clock import FakeClock
from mainframe.ratelimit import TokenBucket, retry_after_header


def test_burst_then_refusal_with_the_time_until_the_next_token() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate_per_s=0.5, burst=2, clock=clock)
    assert bucket.take("a") == 0.0 and bucket.take("a") == 0.0
    assert bucket.take("a") == 2.0
    assert bucket.take("b") == 0.0, "keys do not share a bucket"
    clock.advance(2.0)
    assert bucket.take("a") == 0.0
    assert retry_after_header(bucket.take("a")) == "2"


def test_tokens_refill_up_to_the_burst_only() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate_per_s=10, burst=3, clock=clock)
    clock.advance(3600)
    allowed = [bucket.take("k") == 0.0 for _ in range(5)]
    assert allowed == [True, True, True, False, False]


def test_retry_after_is_whole_seconds_and_never_zero() -> None:
    assert retry_after_header(0.01) == "1"
    assert retry_after_header(2.2) == "3"
