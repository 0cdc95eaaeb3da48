"""The lifecycle rules, without a database or a clock."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mainframe.lifecycle.rules import (
    EchoError,
    Holding,
    QueueState,
    StaleCode,
    Status,
    diagnose_stale,
    lapse_dead_letter_reason,
    queue_state,
    require_echo_pair,
    settle,
)

held = Holding(Status.PENDING, 2, "a-1", "w1")


def test_finished_is_terminal_success() -> None:
    s = settle(outcome="finished", retryable=True, attempt=3, max_attempts=3)
    assert (s.status, s.dead_letter_reason) == (Status.FINISHED, None)


def test_non_retryable_failure_is_plain_even_at_the_cap() -> None:
    s = settle(outcome="failed", retryable=False, attempt=3, max_attempts=3)
    assert (s.status, s.dead_letter_reason, s.fail_reason) == (Status.FAILED, None, "failed")


@given(attempt=st.integers(1, 50), cap=st.integers(1, 50))
def test_retryable_failure_requeues_below_the_cap_and_dead_letters_at_it(
    attempt: int, cap: int
) -> None:
    s = settle(outcome="failed", retryable=True, attempt=attempt, max_attempts=cap)
    if attempt < cap:
        assert s.status is Status.QUEUED and s.dead_letter_reason is None
    else:
        assert s.status is Status.FAILED and s.dead_letter_reason == "attempts_exhausted"


def test_echo_must_be_both_or_neither() -> None:
    assert require_echo_pair(1, "x") is True
    assert require_echo_pair(None, None) is False
    for partial, missing in (((1, None), "assignment_id"), ((None, "x"), "attempt")):
        with pytest.raises(EchoError) as refused:
            require_echo_pair(*partial)
        assert refused.value.missing == missing


@pytest.mark.parametrize(
    ("holding", "worker", "attempt", "assignment", "expected"),
    [
        (held, "w1", 2, "a-1", None),
        (Holding(Status.FINISHED, 2, "a-1", "w1"), "w1", 2, "a-1", StaleCode.ALREADY_TERMINAL),
        (Holding(Status.FAILED, 2, "a-1", "w1"), "w2", 1, "zz", StaleCode.ALREADY_TERMINAL),
        (held, "w2", 2, "a-1", StaleCode.NOT_LEASE_HOLDER),
        (held, "w1", 1, "a-1", StaleCode.STALE_ASSIGNMENT),
        (held, "w1", 2, "a-0", StaleCode.STALE_ASSIGNMENT),
        (Holding(Status.QUEUED, 2, "a-1", "w1"), "w1", 2, "a-1", StaleCode.STALE_ASSIGNMENT),
        (held, "w1", None, None, StaleCode.STALE_ASSIGNMENT),
        (Holding(Status.PENDING, 1, "a-1", "w1"), "w1", None, None, None),
    ],
)
def test_first_matching_stale_code_wins(
    holding: Holding,
    worker: str,
    attempt: int | None,
    assignment: str | None,
    expected: StaleCode | None,
) -> None:
    assert (
        diagnose_stale(holding, worker=worker, attempt=attempt, assignment_id=assignment)
        == expected
    )


def test_lapse_reasons_name_the_kind_of_lease() -> None:
    assert lapse_dead_letter_reason(waiting=False) == "lease_expired"
    assert lapse_dead_letter_reason(waiting=True) == "interrupt_expired"


@pytest.mark.parametrize(
    ("status", "paused", "expires", "available", "count", "expected"),
    [
        (Status.QUEUED, False, None, 100, 0, QueueState.QUEUED),
        (Status.QUEUED, False, None, 101, 1, QueueState.SCHEDULED),
        # A paused queue's scans are paused, parked or not, due or waiting a backoff.
        (Status.QUEUED, True, None, None, 0, QueueState.PAUSED),
        (Status.QUEUED, True, None, 100, 1, QueueState.PAUSED),
        (Status.QUEUED, True, None, 101, 1, QueueState.PAUSED),
        # Still parked after its queue was resumed (a resume cut short): no poll reaches it.
        (Status.QUEUED, False, None, None, 0, QueueState.PAUSED),
        (Status.QUARANTINED, True, None, None, 0, QueueState.QUARANTINED),
        (Status.PENDING, True, 101, None, 3, QueueState.PENDING),
        (Status.PENDING, False, 100, None, 2, QueueState.PENDING),
        (Status.PENDING, True, 99, None, 2, QueueState.RETRYABLE),
        (Status.PENDING, False, 99, None, 3, QueueState.EXHAUSTED),
        (Status.FINISHED, True, None, None, 1, None),
    ],
)
def test_queue_state(
    status: Status,
    paused: bool,
    expires: int | None,
    available: int | None,
    count: int,
    expected: QueueState | None,
) -> None:
    state = queue_state(
        status=status,
        queue_paused=paused,
        lease_expires_at=expires,
        available_at=available,
        attempt_count=count,
        now=100,
        max_attempts=3,
    )
    assert state == expected
