"""A worker's report planned into its close before any SQL runs (lifecycle/reports.py): where
the scan goes, what the close writes, the events it produces, and the answer a replay gets."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mainframe.lifecycle.backoff import RetryPolicy
from mainframe.lifecycle.rules import DeadLetterReason, Report, Status, plan
from mainframe.lifecycle.scans import (
    AttemptFailed,
    ScanDeadLettered,
    ScanFinished,
    ScanReady,
    ScanRecord,
    replayed,
    settlement_events,
)

RETRY = RetryPolicy(base=10.0, cap=600.0)


def report(outcome: str = "finished", **changes: Any) -> Report:
    base = Report(outcome, True, 2, "a-2", "why", "s3://x", '{"ok": true}')
    return replace(base, **changes)


def closed_scan(status: Status, **changes: Any) -> ScanRecord:
    """The scan as a close on attempt 2 left it."""
    base = ScanRecord(
        id=7, endpoint_id=1, endpoint="pypi", queue="default", name="left-pad", version="1",
        kind="package", payload=None, status=status, verified=True, source="feed",
        worker="w1", attempt_count=2, assignment_id="a-2", leased_at=100, lease_expires_at=None,
        wait_reason=None, created_at=50, updated_at=200, finished_at=None,
        dead_lettered_at=None, fail_reason=None, result=None, attempt_base=0,
        available_at=None,
    )  # fmt: skip
    return replace(base, **changes)


def test_a_finished_report_keeps_its_result_and_names_no_cause() -> None:
    p = plan(7, report(), max_attempts=3, retry=RETRY, draw=0.5)
    values = p.values()
    assert p.settlement.status is Status.FINISHED and p.terminal and p.cause is None
    assert values["result"] == '{"ok": true}' and values["dead"] is False
    assert values["assignment"] == "a-2" and values["result_digest"] == report().digest()


def test_a_retryable_failure_under_the_cap_goes_round_again_without_its_result() -> None:
    p = plan(7, report("failed"), max_attempts=3, retry=RETRY, draw=0.5)
    values = p.values()
    assert p.settlement.status is Status.QUEUED and not p.terminal
    assert values["result"] is None  # only a terminal scan keeps a result
    assert p.delay_us == 10_000_000  # half of attempt 2's 20 s ceiling
    assert p.cause is not None and values["cause"] == p.cause.key


def test_a_retry_after_the_worker_asked_for_replaces_the_backoff() -> None:
    p = plan(7, report("failed", retry_after=3.5), max_attempts=3, retry=RETRY, draw=0.99)
    assert p.delay_us == 3_500_000


def test_a_failure_at_the_cap_is_a_dead_letter_announced_with_its_last_attempt() -> None:
    p = plan(7, report("failed"), max_attempts=2, retry=RETRY, draw=0.5)
    assert p.values()["dead"] is True
    assert p.settlement.dead_letter_reason is DeadLetterReason.ATTEMPTS_EXHAUSTED
    scan = closed_scan(
        Status.FAILED, finished_at=300, dead_lettered_at=300, fail_reason="attempts_exhausted"
    )
    [event] = settlement_events(scan, p)
    assert isinstance(event, ScanDeadLettered)
    assert event.reason is DeadLetterReason.ATTEMPTS_EXHAUSTED
    assert event.final_attempt is not None
    final = event.final_attempt
    assert (final.seq, final.summary, final.artifact, final.at) == (2, "why", "s3://x", 300)


def test_each_settlement_announces_what_a_subscriber_acts_on() -> None:
    finished = plan(7, report(), max_attempts=3, retry=RETRY, draw=0.5)
    assert [type(e) for e in settlement_events(closed_scan(Status.FINISHED), finished)] == [
        ScanFinished
    ]
    again = plan(7, report("failed"), max_attempts=3, retry=RETRY, draw=0.5)
    events = settlement_events(closed_scan(Status.QUEUED, available_at=900), again)
    assert [type(e) for e in events] == [AttemptFailed, ScanReady]
    assert isinstance(events[1], ScanReady) and events[1].available_at == 900


def test_a_replay_gets_the_answer_its_close_gave() -> None:
    dead = replayed(
        scan_id=7, attempt=2, closed_at=300, status="FAILED", available_at=None,
        fail_reason="attempts_exhausted",
    )  # fmt: skip
    assert (dead.status, dead.finished_at, dead.dead_lettered_at) == (Status.FAILED, 300, 300)
    again = replayed(
        scan_id=7, attempt=1, closed_at=300, status="QUEUED", available_at=400, fail_reason=None
    )
    assert (again.finished_at, again.dead_lettered_at, again.available_at) == (None, None, 400)
