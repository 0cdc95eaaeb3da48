"""A source's quota as pure rules: the bucket (lifecycle/bucket.py, tested in test_bucket.py)
holds the burst then the rate, a source without a rate never waits, a Retry-After is bounded
both ways, and a policy out of range is refused."""

from __future__ import annotations

import pytest

from mainframe.clock import MICROS
from mainframe.lifecycle.bucket import Bucket, Reservation, full
from mainframe.watch.quota import MAX_NOT_BEFORE_S, QuotaPolicy, not_before, take

T = 1_790_000_000 * MICROS
RATE = QuotaPolicy(requests_per_second=2.0, burst=3)


def test_a_quiet_source_lets_the_burst_go_at_once_then_the_rate() -> None:
    bucket, waits = full(RATE.burst, T), []
    for _ in range(5):
        got = take(bucket, RATE, cost=1, now_us=T, max_wait_us=10 * MICROS)
        assert isinstance(got, Reservation)
        bucket, _ = got.bucket, waits.append(got.wait_us)
    assert waits == [0, 0, 0, MICROS // 2, MICROS], "three at once, then one every 0.5 s"


def test_without_a_rate_nothing_waits() -> None:
    unlimited = QuotaPolicy(max_concurrency=2)
    got = take(Bucket(0.0, T), unlimited, cost=2, now_us=T, max_wait_us=0)
    assert isinstance(got, Reservation) and got.wait_us == 0


@pytest.mark.parametrize(
    ("asked", "held_s", "bounded"),
    [
        (30.0, 30.0, False),
        (0.0, 0.0, False),
        (-300.0, 0.0, True),  # a date in the past: no hold, and said so
        (86_400.0 * 30, MAX_NOT_BEFORE_S, True),  # absurdly far: an hour, and said so
        (float("inf"), MAX_NOT_BEFORE_S, True),
    ],
)
def test_a_retry_after_is_bounded_both_ways(asked: float, held_s: float, bounded: bool) -> None:
    hold = not_before(T, asked)
    assert hold.until_us == T + round(held_s * MICROS) and hold.bounded is bounded


@pytest.mark.parametrize(
    "policy",
    [
        {"requests_per_second": 0.0},
        {"requests_per_second": -1.0},
        {"burst": 0},
        {"max_concurrency": 0},
    ],
)
def test_a_policy_out_of_range_is_refused(policy: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        QuotaPolicy(**policy)  # type: ignore[arg-type]
