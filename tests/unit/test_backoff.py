"""Retries wait: the backoff schedule as a pure function of the attempt and a random draw."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mainframe.lifecycle.backoff import (
    MAX_REQUESTED_DELAY_SECONDS,
    RetryPolicy,
    retry_delay_us,
)

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
