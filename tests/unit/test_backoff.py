"""Retries wait: the one backoff (a step doubling per retry up to a cap, a draw within a
jitter band of it) as a pure function of the retry and a random draw, with each caller's
constants: a scan's retries, the worker's, the hooks' and the watcher's."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mainframe.client import runner, sdk
from mainframe.client.heartbeat import HEARTBEAT_RETRY_DELAY, HEARTBEAT_RETRY_JITTER
from mainframe.hooks import policy as hooks
from mainframe.lifecycle.backoff import (
    EQUAL_JITTER,
    FULL_JITTER,
    MAX_REQUESTED_DELAY_SECONDS,
    Backoff,
    Jitter,
    RetryPolicy,
    retry_delay_us,
)
from mainframe.watch.engine import POLL_BACKOFF

S = 1_000_000


def test_the_ceiling_doubles_per_attempt_up_to_the_cap() -> None:
    policy = RetryPolicy(base=10, cap=600)
    assert [policy.ceiling(n) for n in range(1, 9)] == [10, 20, 40, 80, 160, 320, 600, 600]


def test_full_jitter_spans_zero_to_the_ceiling() -> None:
    policy = RetryPolicy(base=10, cap=600)
    assert retry_delay_us(policy, attempt=2, draw=0.0) == 0
    assert retry_delay_us(policy, attempt=2, draw=0.5) == 10 * S
    assert retry_delay_us(policy, attempt=2, draw=0.999999) < 20 * S


def test_a_base_of_zero_turns_the_wait_off() -> None:
    assert retry_delay_us(RetryPolicy(base=0, cap=600), attempt=5, draw=0.9) == 0


def test_a_worker_may_ask_for_its_own_delay_within_a_bound() -> None:
    policy = RetryPolicy(base=10, cap=600)
    assert retry_delay_us(policy, attempt=1, draw=0.9, requested=2.5) == 2_500_000
    assert retry_delay_us(policy, attempt=1, draw=0.9, requested=10**9) == round(
        MAX_REQUESTED_DELAY_SECONDS * S
    )
    assert retry_delay_us(RetryPolicy(base=0), attempt=1, draw=0.0, requested=3) == 3 * S
    assert retry_delay_us(policy, attempt=1, draw=0.9, requested=-5) == 0


@given(
    base=st.floats(0, 3600),
    cap=st.floats(0, 86400),
    attempt=st.integers(1, 10**6),
    draw=st.floats(0, 1, exclude_max=True),
)
def test_delays_are_bounded_by_the_cap_whatever_the_attempt(
    base: float, cap: float, attempt: int, draw: float
) -> None:
    delay = retry_delay_us(RetryPolicy(base=base, cap=cap), attempt=attempt, draw=draw)
    assert 0 <= delay <= round(cap * S) + 1


def test_equal_jitter_keeps_half_the_step_so_no_retry_comes_at_once() -> None:
    backoff = Backoff(base=0.5, cap=8.0, jitter=EQUAL_JITTER)
    assert [backoff.delay(n, 0.0) for n in (1, 2, 5, 9)] == [0.25, 0.5, 4.0, 4.0]
    assert [backoff.delay(n, 0.999999) for n in (1, 2)] == pytest.approx([0.5, 1.0])


def test_each_caller_keeps_its_own_schedule() -> None:
    """The first waits each part draws from, lowest and highest."""

    def span(backoff: Backoff, retry: int) -> tuple[float, float]:
        return backoff.delay(retry, 0.0), backoff.delay(retry, 1.0)

    assert span(RetryPolicy(), 1) == (0.0, 10.0), "a scan: up to 10 s, then 20, 40 ... 600"
    assert span(sdk.LEASE_BACKOFF, 1) == (0.25, 0.5), "the SDK's poll"
    assert span(runner.LEASE_BACKOFF, 1) == (1.0, 2.0), "the worker's poll"
    assert span(runner.REPORT_BACKOFF, 1) == (0.5, 1.0), "the worker's report"
    assert span(runner.REPORT_BACKOFF, 12) == (30.0, 60.0), "at most a minute"
    assert span(POLL_BACKOFF, 1) == (0.0, 2.0) and span(POLL_BACKOFF, 9) == (0.0, 60.0)
    assert (hooks.JITTER.spread(5.0, 0.0), hooks.JITTER.spread(5.0, 1.0)) == (3.75, 6.25)
    assert HEARTBEAT_RETRY_JITTER.spread(HEARTBEAT_RETRY_DELAY, 0.0) == 0.5


bands = st.tuples(st.floats(0, 1), st.floats(0, 1)).map(lambda b: Jitter(min(b), max(b)))


@given(
    base=st.floats(0, 3600),
    cap=st.floats(0, 86400),
    jitter=st.one_of(st.just(FULL_JITTER), st.just(EQUAL_JITTER), bands),
    retry=st.integers(1, 10**6),
    draw=st.floats(0, 1, exclude_max=True),
)
def test_a_wait_lies_in_its_band_of_a_step_never_past_the_cap(
    base: float, cap: float, jitter: Jitter, retry: int, draw: float
) -> None:
    backoff = Backoff(base=base, cap=cap, jitter=jitter)
    step = backoff.ceiling(retry)
    delay = backoff.delay(retry, draw)
    assert step <= cap
    assert jitter.low * step - 1e-9 <= delay <= jitter.high * step + 1e-9
    assert delay <= cap + 1e-9


@given(cap=st.floats(0, 86400), retry=st.integers(1, 10**6), draw=st.floats(0, 1))
def test_a_base_of_zero_never_waits(cap: float, retry: int, draw: float) -> None:
    assert Backoff(base=0, cap=cap, jitter=EQUAL_JITTER).delay(retry, draw) == 0.0


@given(base=st.floats(0.001, 3600), cap=st.floats(0.001, 86400), retry=st.integers(1, 200))
def test_steps_never_shrink(base: float, cap: float, retry: int) -> None:
    backoff = Backoff(base=base, cap=cap)
    assert backoff.ceiling(retry) <= backoff.ceiling(retry + 1)
