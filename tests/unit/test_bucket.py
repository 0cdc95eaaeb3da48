"""The one token bucket, as the server's limiters and the watcher's shared quota use it: it
refills at the rate up to the burst, requests reserve tokens in the order they ask (going into
debt, so each leaves no sooner than the rate allows), a wait beyond the bound takes nothing,
and whoever asks when, no span of time lets through more than the burst plus the rate over it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mainframe.clock import MICROS
from mainframe.lifecycle.bucket import Bucket, Reservation, full, refilled, reserve

T = 1_790_000_000 * MICROS


def test_a_wait_beyond_the_bound_takes_nothing() -> None:
    empty = Bucket(0.0, T)
    assert reserve(empty, rate=2.0, burst=3, cost=1, now_us=T, max_wait_us=MICROS // 4) == (
        MICROS // 2
    )
    got = reserve(empty, rate=2.0, burst=3, cost=1, now_us=T, max_wait_us=MICROS)
    assert isinstance(got, Reservation) and got.bucket.tokens == -1.0


def test_the_bucket_refills_at_the_rate_up_to_the_burst() -> None:
    assert refilled(Bucket(0.0, T), rate=2.0, burst=3, now_us=T + MICROS).tokens == 2.0
    assert refilled(Bucket(0.0, T), rate=2.0, burst=3, now_us=T + 60 * MICROS).tokens == 3.0
    assert refilled(Bucket(-2.0, T), rate=2.0, burst=3, now_us=T + MICROS).tokens == 0.0, (
        "debt is paid first"
    )


def test_a_clock_that_steps_back_neither_adds_nor_takes_tokens() -> None:
    back = refilled(Bucket(1.5, T), rate=2.0, burst=3, now_us=T - 10 * MICROS)
    assert back == Bucket(1.5, T)


@given(
    gaps=st.lists(st.integers(0, 3 * MICROS), min_size=1, max_size=60),
    rate=st.sampled_from([0.01, 0.5, 1.0, 2.0, 7.5]),
    burst=st.integers(1, 10),
)
def test_without_waiting_no_span_lets_more_through_than_the_burst_and_the_rate(
    gaps: list[int], rate: float, burst: int
) -> None:
    """The server's limiters take only what is there (max_wait_us=0): between any two grants,
    both counted, at most burst + rate x the time between them went through."""
    bucket, now, granted = full(burst, T), T, []
    for gap in gaps:
        now += gap
        got = reserve(bucket, rate=rate, burst=burst, cost=1, now_us=now, max_wait_us=0)
        if isinstance(got, Reservation):
            assert got.wait_us == 0
            bucket = got.bucket
            granted.append(now)
        else:
            assert got > 0, "a refusal says how long until a token is free"
    for i, first in enumerate(granted):
        for j in range(i, len(granted)):
            assert j - i + 1 <= burst + rate * (granted[j] - first) / MICROS + 1e-9


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
    bucket, now, leaves = full(burst, T), T, []
    for gap in asks:
        now += gap
        got = reserve(
            bucket, rate=rate, burst=burst, cost=cost, now_us=now, max_wait_us=3600 * MICROS
        )
        assert isinstance(got, Reservation)
        bucket = got.bucket
        leaves.append(now + got.wait_us)
    assert leaves == sorted(leaves), "requests leave in the order they asked"
    for i, first in enumerate(leaves):
        for j in range(i, len(leaves)):
            span_s = (leaves[j] - first) / MICROS
            sent = (j - i + 1) * cost
            assert sent <= max(burst, cost) + span_s * rate + cost
