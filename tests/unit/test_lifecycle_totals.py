"""What every close writes beside the scan, computed before any SQL runs: the outcome totals
a transaction's events change (lifecycle/reports.py), the causes it names
(lifecycle/causes.py::named) and the history row of a closed attempt
(lifecycle/reports.py::history_row)."""

from __future__ import annotations

import pytest

from mainframe.lifecycle.causes import Cause, cause_of, named
from mainframe.lifecycle.rules import Status, plan
from mainframe.lifecycle.scans import (
    SHARDS,
    AttemptFailed,
    EndpointRevoked,
    ScanFailed,
    ScanFinished,
    ScanRedriven,
    ScanRef,
    history_row,
    increments,
    settlement_events,
    shard_of,
)
from tests.unit.test_lifecycle_reports import RETRY, closed_scan, report


def ref(scan_id: int, endpoint_id: int) -> ScanRef:
    return ScanRef(scan_id, endpoint_id, f"e{endpoint_id}", "default", "p", "1", "package",
                   True, None, 0)  # fmt: skip


def test_ended_scans_are_counted_by_endpoint_and_outcome_in_one_sorted_shard() -> None:
    events = [
        ScanFinished(ref(1, 2), 1),
        ScanFinished(ref(2, 1), 1),
        ScanFinished(ref(3, 2), 1),
        ScanFailed(ref(4, 1), 1),
        EndpointRevoked(1, "e1", 5),
        AttemptFailed(ref(5, 1), 1, "failed", "w"),  # went round again: nothing ended
    ]
    rows = increments(events, spread=SHARDS + 3)
    assert rows == [
        {"endpoint": 1, "outcome": "dead_lettered", "shard": 3, "n": 5},
        {"endpoint": 1, "outcome": "failed", "shard": 3, "n": 1},
        {"endpoint": 1, "outcome": "finished", "shard": 3, "n": 1},
        {"endpoint": 2, "outcome": "finished", "shard": 3, "n": 2},
    ]


def test_a_redriven_dead_letter_leaves_the_total_and_a_net_zero_writes_nothing() -> None:
    revoked = EndpointRevoked(1, "e1", 1)
    assert increments([ScanRedriven(ref(1, 1))], spread=0) == [
        {"endpoint": 1, "outcome": "dead_lettered", "shard": 0, "n": -1}
    ]
    assert increments([revoked, ScanRedriven(ref(1, 1))], spread=0) == []


def test_every_spread_lands_on_one_of_the_shards() -> None:
    assert {shard_of(spread) for spread in range(1000, 1100)} == set(range(SHARDS))


def test_each_cause_is_named_once_and_closes_without_one_name_nothing() -> None:
    timeout = cause_of("failed", "timed out after 10 s")
    same = cause_of("failed", "timed out after 12 s")
    other = Cause("k", "p", grouping_version=1)
    assert named([timeout, None, same, other]) == [
        {"cause": timeout.key, "pattern": "timed out after <duration>", "grouping_version": 2},
        {"cause": "k", "pattern": "p", "grouping_version": 1},
    ]
    assert named([None, None]) == []


def test_a_history_row_records_the_close_and_the_answer_given() -> None:
    p = plan(7, report("failed"), max_attempts=3, retry=RETRY, draw=0.5)
    scan = closed_scan(Status.QUEUED, attempt_base=3, available_at=900)
    row = history_row(scan, p, "a-9,a-10")
    assert row["seq"] == 5 and row["attempt"] == 2 and row["assignment"] == "a-2"
    assert row["outcome"] == "failed" and row["settled_status"] == "QUEUED"
    assert row["settled_available_at"] == 900 and row["next_assignments"] == "a-9,a-10"
    assert p.cause is not None and row["cause"] == p.cause.key
    assert row["result_digest"] == p.digest
    assert history_row(scan, p, None, "operator")["result_digest"] == "operator"


@pytest.mark.parametrize(
    ("outcome", "retryable", "attempt"),
    [("finished", True, 1), ("failed", False, 1), ("failed", True, 1), ("failed", True, 3)],
)
def test_a_close_names_the_total_its_events_count(
    outcome: str, retryable: bool, attempt: int
) -> None:
    """A result of one adds to the total its plan names (complete_one's `:ended`): the one the
    events of the same close count, or none for a scan that goes round again."""
    p = plan(7, report(outcome, retryable=retryable, attempt=attempt), max_attempts=3,
             retry=RETRY, draw=0.5)  # fmt: skip
    scan = closed_scan(p.settlement.status, finished_at=300, available_at=900)
    counted = increments(settlement_events(scan, p), spread=0)
    assert [row["outcome"] for row in counted] == [p.values()["ended"]] * len(counted)
    assert len(counted) == (p.values()["ended"] is not None)
