"""A source's quota as pure rules: the bucket refills at the rate up to the burst, requests
reserve tokens in the order they ask (going into debt, so each leaves no sooner than the rate
allows), a wait beyond the bound takes nothing, and a Retry-After is bounded both ways."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mainframe.clock import MICROS
from mainframe.watch.quota import (
    MAX_NOT_BEFORE_S,
    Bucket,
    QuotaPolicy,
    Reservation,
    full,
    not_before,
    refilled,
    reserve,
)

T = 1_790_000_000 * MICROS
RATE = QuotaPolicy(requests_per_second=2.0, burst=3)


def test_a_quiet_source_lets_the_burst_go_at_once_then_the_rate() -> None:
    bucket, waits = full(RATE, T), []
    for _ in range(5):
        got = reserve(bucket, RATE, cost=1, now_us=T, max_wait_us=10 * MICROS)
        assert isinstance(got, Reservation)
        bucket, _ = got.bucket, waits.append(got.wait_us)
    assert waits == [0, 0, 0, MICROS // 2, MICROS], "three at once, then one every 0.5 s"


def test_a_wait_beyond_the_bound_takes_nothing() -> None:
    empty = Bucket(0.0, T)
    assert reserve(empty, RATE, cost=1, now_us=T, max_wait_us=MICROS // 4) == MICROS // 2
    got = reserve(empty, RATE, cost=1, now_us=T, max_wait_us=MICROS)
    assert isinstance(got, Reservation) and got.bucket.tokens == -1.0


def test_the_bucket_refills_at_the_rate_up_to_the_burst() -> None:
    assert refilled(Bucket(0.0, T), RATE, T + MICROS).tokens == 2.0
    assert refilled(Bucket(0.0, T), RATE, T + 60 * MICROS).tokens == 3.0
    assert refilled(Bucket(-2.0, T), RATE, T + MICROS).tokens == 0.0, "debt is paid first"


def test_without_a_rate_nothing_waits() -> None:
    unlimited = QuotaPolicy(max_concurrency=2)
    got = reserve(Bucket(0.0, T), unlimited, cost=2, now_us=T, max_wait_us=0)
    assert isinstance(got, Reservation) and got.wait_us == 0


@given(
    asks=st.lists(st.integers(0, 3 * MICROS), min_size=1, max_size=60),
    rate=st.sampled_from([0.5, 1.0, 2.0, 7.5]),
    burst=st.integers(1, 5),
    cost=st.integers(1, 2),
)
def test_requests_never_leave_faster_than_the_burst_and_the_rate(
    asks: list[int], rate: float, burst: int, cost: int
) -> None:
    """Whoever asks when, the requests granted leave so that any span of time holds at most
    the burst plus what the rate accrues over it (plus one poll's cost, its rounding)."""
    policy = QuotaPolicy(requests_per_second=rate, burst=burst)
    bucket, now, leaves = full(policy, T), T, []
    for gap in asks:
        now += gap
        got = reserve(bucket, policy, cost=cost, now_us=now, max_wait_us=3600 * MICROS)
        assert isinstance(got, Reservation)
        bucket = got.bucket
        leaves.append(now + got.wait_us)
    assert leaves == sorted(leaves), "requests leave in the order they asked"
    for i, first in enumerate(leaves):
        for j in range(i, len(leaves)):
            span_s = (leaves[j] - first) / MICROS
            sent = (j - i + 1) * cost
            assert sent <= max(burst, cost) + span_s * rate + cost


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
