"""The watcher's pure core: window keys, closed windows, the backoff between refused polls
and alert policies, without a database or a clock."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mainframe.clock import MICROS
from mainframe.watch.engine import POLL_BACKOFF
from mainframe.watch.observations import Counts, Observation, PollClass
from mainframe.watch.policies import (
    AlertState,
    DeliveryPolicy,
    ObserverHealth,
    ObserverPolicy,
    advance,
    changed,
)
from mainframe.watch.windows import Window, closed_windows

T = 1_790_000_040 * MICROS  # a minute boundary


def test_window_key_is_stable_and_round_trips() -> None:
    start = datetime(2026, 9, 27, 10, 14, tzinfo=UTC)
    window = Window(int(start.timestamp()) * MICROS, 60)
    assert window.key == "2026-09-27T10:14:00Z/60s"
    assert Window.from_key(window.key) == window
    assert Window.containing(window.start_us + 59 * MICROS, 60) == window
    assert window.end_us - window.start_us == 60 * MICROS


def test_window_from_key_rejects_other_strings() -> None:
    with pytest.raises(ValueError):
        Window.from_key("2026-09-27T10:14:00Z")


def test_closed_windows_wait_for_the_settle_delay() -> None:
    # 3 s after the boundary with a 5 s settle delay, the window that just ended is not ready.
    early = closed_windows(now_us=T + 3 * MICROS, length_s=60, settle_s=5, lookback_s=60)
    assert early == [Window(T - 120 * MICROS, 60)]
    ready = closed_windows(now_us=T + 5 * MICROS, length_s=60, settle_s=5, lookback_s=60)
    assert ready == [Window(T - 60 * MICROS, 60)]


def test_closed_windows_cover_the_lookback_oldest_first() -> None:
    found = closed_windows(now_us=T + 10 * MICROS, length_s=60, settle_s=0, lookback_s=180)
    assert [w.start_us for w in found] == [T - 180 * MICROS, T - 120 * MICROS, T - 60 * MICROS]
    assert all(w.end_us <= T for w in found), "never a window that has not closed"


@given(now=st.integers(10**15, 2 * 10**15), settle=st.floats(0, 120), windows=st.integers(0, 10))
def test_closed_windows_are_closed_contiguous_and_bounded(
    now: int, settle: float, windows: int
) -> None:
    found = closed_windows(now_us=now, length_s=60, settle_s=settle, lookback_s=60 * windows)
    assert len(found) == windows
    assert all(w.end_us <= now - round(settle * MICROS) for w in found)
    assert all(b.start_us == a.end_us for a, b in pairwise(found))


def test_a_refusal_names_its_retry_after_whatever_the_header_case() -> None:
    headers = (("RateLimit", "limit=60"), ("Retry-After", " 7 "))
    assert Observation(PollClass.THROTTLED, status=429, retry_headers=headers).retry_after == " 7 "
    assert Observation(PollClass.THROTTLED, status=429).retry_after is None


def test_without_retry_after_full_jitter_is_seeded_and_capped() -> None:
    delays = [POLL_BACKOFF.delay(n, random.Random(7).random()) for n in range(1, 5)]
    expected = [random.Random(7).uniform(0.0, 2.0**n) for n in range(1, 5)]
    assert delays == expected
    rng = random.Random(3)
    assert all(0.0 <= POLL_BACKOFF.delay(30, rng.random()) <= 60.0 for _ in range(50))


def test_only_a_complete_observation_with_counts_is_complete() -> None:
    assert Observation.of(10, 1).complete
    assert not Observation(PollClass.COMPLETE).complete
    assert not Observation(PollClass.PARTIAL, Counts(10, 1)).complete


POLICY = DeliveryPolicy(version="d1", ratio=0.1, min_attempts=20, absolute_failures=50)


@pytest.mark.parametrize(
    ("attempts", "failures", "firing"),
    [
        (100, 11, True),  # ratio above the threshold with enough volume
        (100, 10, False),  # exactly at the threshold is not above it
        (19, 19, False),  # a total failure below the minimum volume...
        (60, 50, True),  # ...but the absolute count catches a small total outage
        (0, 0, False),
    ],
)
def test_delivery_policy(attempts: int, failures: int, firing: bool) -> None:
    assert POLICY.firing(Counts(attempts, failures)) is firing


def test_observer_policy_flags_each_condition_on_its_own() -> None:
    policy = ObserverPolicy(
        "o1", max_checkpoint_age_s=300, max_throttle_exhaustions=3, max_outbox_age_s=60
    )
    healthy = ObserverHealth(T - 100 * MICROS, 2, T - 30 * MICROS)
    quiet = {
        "stale_checkpoint": False,
        "throttle_exhaustion": False,
        "outbox_delay": False,
        "auth_failure": False,
    }
    assert policy.firing(healthy, now_us=T) == quiet
    stale = policy.firing(ObserverHealth(T - 301 * MICROS, 0, None), now_us=T)
    assert stale == quiet | {"stale_checkpoint": True}
    assert policy.firing(ObserverHealth(None, 0, None), now_us=T)["stale_checkpoint"]
    assert policy.firing(ObserverHealth(T, 3, None), now_us=T)["throttle_exhaustion"]
    assert policy.firing(ObserverHealth(T, 0, T - 61 * MICROS), now_us=T)["outbox_delay"]
    # A refused credential fires at once, however fresh the checkpoint.
    refused = policy.firing(ObserverHealth(T, 0, None, auth_refused=True), now_us=T)
    assert refused == quiet | {"auth_failure": True}


def test_advance_opens_refreshes_and_resolves() -> None:
    opened = advance(None, firing=True, window_end_us=100)
    assert opened == AlertState(True, 100) and changed(None, opened)
    refreshed = advance(opened, firing=True, window_end_us=200)
    assert refreshed == AlertState(True, 200) and not changed(opened, refreshed)
    resolved = advance(refreshed, firing=False, window_end_us=300)
    assert resolved == AlertState(False, 300) and changed(refreshed, resolved)


def test_a_first_healthy_evaluation_is_no_transition() -> None:
    quiet = advance(None, firing=False, window_end_us=100)
    assert quiet == AlertState(False, 100) and not changed(None, quiet)


@given(newer=st.integers(0, 10**6), older=st.integers(0, 10**6), firing=st.booleans())
def test_an_older_or_equal_window_never_moves_the_state(
    newer: int, older: int, firing: bool
) -> None:
    current = AlertState(not firing, newer)
    moved = advance(current, firing=firing, window_end_us=min(older, newer))
    assert moved is None and not changed(current, moved)
