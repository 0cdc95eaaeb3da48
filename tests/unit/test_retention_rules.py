"""What is due for pruning, as pure decisions: each kind after its own retention from when it
ended and not a microsecond before, dead letters by their own clock, live scans never, and a
retention of `never` keeping everything."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mainframe.lifecycle.retention import (
    DAY_US,
    DELIVERY_MINUTE_US,
    RETAINED,
    SCAN_KINDS,
    PruneKind,
    RetentionPolicy,
    delivery_minute_is_due,
    is_due,
    kept_us,
    pruned_counts,
    scan_is_due,
    scan_kind,
)
from mainframe.lifecycle.rules import LIVE, Status
from mainframe.parsers import parse_retention_days
from mainframe.settings import Settings
from mainframe.store.accounts.totals import OUTCOMES

NOW = 1_790_000_000_000_000
DEFAULTS = RetentionPolicy()


def test_a_row_is_due_exactly_when_its_retention_has_passed() -> None:
    kept = 7 * DAY_US
    assert not is_due(NOW - kept + 1, now_us=NOW, kept=kept)
    assert is_due(NOW - kept, now_us=NOW, kept=kept)
    assert is_due(NOW - kept - 1, now_us=NOW, kept=kept)


def test_zero_prunes_whatever_has_ended_and_never_keeps_everything() -> None:
    assert is_due(NOW, now_us=NOW, kept=0)
    assert not is_due(NOW + 1, now_us=NOW, kept=0)  # another host's clock ahead of ours
    assert not is_due(0, now_us=NOW, kept=None)
    assert not is_due(None, now_us=NOW, kept=0)  # not ended: never due


@given(
    ended=st.integers(0, 2 * NOW),
    kept=st.one_of(st.none(), st.integers(0, 400 * DAY_US)),
)
def test_due_is_monotonic_in_time(ended: int, kept: int | None) -> None:
    """Once due, a row stays due as time goes on (pruning never has to undo a decision)."""
    if is_due(ended, now_us=NOW, kept=kept):
        assert is_due(ended, now_us=NOW + 1, kept=kept)


@pytest.mark.parametrize(
    ("status", "dead_lettered_at", "kind"),
    [
        (Status.FINISHED, None, PruneKind.FINISHED),
        (Status.FAILED, None, PruneKind.FAILED),
        (Status.FAILED, NOW, PruneKind.DEAD_LETTERED),
        *((status, None, None) for status in LIVE),
    ],
)
def test_each_scan_falls_under_one_retention(
    status: Status, dead_lettered_at: int | None, kind: PruneKind | None
) -> None:
    assert scan_kind(status, dead_lettered_at) is kind


def test_a_dead_letter_outlives_the_finished_retention_on_its_own_clock() -> None:
    """Dead-lettered eight days ago: past the finished scans' week, within its own quarter."""
    ended = NOW - 8 * DAY_US
    dead = {"status": Status.FAILED, "finished_at": ended, "dead_lettered_at": ended}
    finished = {"status": Status.FINISHED, "finished_at": ended, "dead_lettered_at": None}
    assert scan_is_due(**finished, now_us=NOW, policy=DEFAULTS)
    assert not scan_is_due(**dead, now_us=NOW, policy=DEFAULTS)
    assert scan_is_due(**dead, now_us=ended + 90 * DAY_US, policy=DEFAULTS)


def test_a_plain_failure_is_kept_for_the_failed_retention() -> None:
    ended = NOW - 8 * DAY_US
    failed = {"status": Status.FAILED, "finished_at": ended, "dead_lettered_at": None}
    assert not scan_is_due(**failed, now_us=NOW, policy=DEFAULTS)
    assert scan_is_due(**failed, now_us=ended + 30 * DAY_US, policy=DEFAULTS)


@pytest.mark.parametrize("status", LIVE)
def test_a_live_scan_is_never_due(status: Status) -> None:
    """A redriven dead letter is QUEUED again, its dead_lettered_at cleared: live, not due."""
    policy = RetentionPolicy.uniform(0)
    assert not scan_is_due(
        status=status, finished_at=None, dead_lettered_at=None, now_us=NOW, policy=policy
    )


def test_a_minute_of_delivery_counts_is_due_once_the_minute_has_ended() -> None:
    minute = NOW - NOW % DELIVERY_MINUTE_US
    assert not delivery_minute_is_due(minute, now_us=minute + DELIVERY_MINUTE_US - 1, kept=0)
    assert delivery_minute_is_due(minute, now_us=minute + DELIVERY_MINUTE_US, kept=0)
    kept = 35 * DAY_US
    end = minute + DELIVERY_MINUTE_US
    assert not delivery_minute_is_due(minute, now_us=end + kept - 1, kept=kept)


def test_the_defaults_and_what_a_pass_prunes() -> None:
    days = {kind: DEFAULTS.kept(kind) for kind in RETAINED}
    assert days == {
        PruneKind.FINISHED: 7 * DAY_US,
        PruneKind.FAILED: 30 * DAY_US,
        PruneKind.DEAD_LETTERED: 90 * DAY_US,
        PruneKind.AUDIT: 365 * DAY_US,
        PruneKind.DELIVERY_COUNTS: 35 * DAY_US,
        PruneKind.BOARD_SESSIONS: 1 * DAY_US,
    }
    # Scans first, the kinds kept forever not at all.
    forever = RetentionPolicy(audit=None, board_sessions=None)
    assert forever.pruned() == (
        PruneKind.FINISHED,
        PruneKind.FAILED,
        PruneKind.DEAD_LETTERED,
        PruneKind.DELIVERY_COUNTS,
    )
    with pytest.raises(ValueError, match="attempts"):
        DEFAULTS.kept(PruneKind.ATTEMPTS)


def test_days_become_microseconds_and_never_stays_forever() -> None:
    assert kept_us(0.5) == DAY_US // 2
    assert kept_us(0) == 0
    assert kept_us(None) is None


@pytest.mark.parametrize(
    ("given_", "days"),
    [("7", 7.0), (" 0.25 ", 0.25), ("0", 0.0), ("never", None), ("NEVER", None), (3, 3.0)],
)
def test_a_retention_is_days_or_the_word_never(given_: object, days: float | None) -> None:
    assert parse_retention_days(given_) == days


@pytest.mark.parametrize("bad", ["-1", "forever", "", "nan", math.inf, 36_501, True, [1]])
def test_anything_else_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="days"):
        parse_retention_days(bad)


def test_the_settings_build_the_policy() -> None:
    settings = Settings(
        finished_retention_days="never",  # type: ignore[arg-type]
        dead_letter_retention_days=0.5,
        audit_retention_days="0",  # type: ignore[arg-type]
    )
    policy = settings.retention_policy()
    assert policy.finished is None and policy.dead_lettered == DAY_US // 2
    assert policy.audit == 0 and policy.failed == DEFAULTS.failed


@given(st.lists(st.integers(min_value=1, max_value=5), max_size=50))
def test_a_batch_adds_to_each_endpoints_pruned_count_what_it_removed_there(
    endpoints: list[int],
) -> None:
    rows = pruned_counts(PruneKind.FAILED, endpoints)
    assert {row["endpoint"]: row["n"] for row in rows} == {
        e: endpoints.count(e) for e in set(endpoints)
    }
    # Under the outcome total's name, in endpoint order: two pruners lock rows alike.
    assert all(row["outcome"] == "failed" for row in rows)
    assert [row["endpoint"] for row in rows] == sorted({*endpoints})


def test_only_scans_have_pruned_counts() -> None:
    # The kinds of scan are named as the outcome totals are, which they are subtracted from.
    assert [kind.value for kind in SCAN_KINDS] == list(OUTCOMES)
    assert [r["outcome"] for r in pruned_counts(PruneKind.DEAD_LETTERED, [1])] == ["dead_lettered"]
    with pytest.raises(ValueError, match="not a kind of scan"):
        pruned_counts(PruneKind.AUDIT, [1])
