"""What `mainframe worker` says it did: scans and attempts apart, each scan by where its last
attempt on this worker left it."""

from __future__ import annotations

import pytest

from mainframe.client.tally import Fate, WorkerTally, fate_of


@pytest.mark.parametrize(
    ("outcome", "retryable", "scan", "fate"),
    [
        ("finished", None, {"status": "FINISHED"}, Fate.FINISHED),
        ("failed", False, {"status": "FAILED", "dead_lettered_at": None}, Fate.FAILED),
        ("failed", True, {"status": "FAILED", "dead_lettered_at": "2026-12-05T10:00:00Z"},
         Fate.DEAD_LETTERED),
        ("failed", True, {"status": "QUEUED", "available_at": "2026-12-05T10:00:10Z"},
         Fate.RETRYING),
        # A server that sends no scan back: what the result itself settles, and no guess.
        ("finished", None, None, Fate.FINISHED),
        ("failed", False, None, Fate.FAILED),
        ("failed", True, None, Fate.ATTEMPT_FAILED),
    ],
)  # fmt: skip
def test_the_reply_says_where_the_scan_went(
    outcome: str, retryable: bool | None, scan: dict[str, str] | None, fate: Fate
) -> None:
    assert fate_of(outcome, retryable, scan) is fate


def test_three_scans_of_three_attempts_are_three_scans() -> None:
    tally = WorkerTally()
    for attempt in range(3):
        for scan_id in (1, 2, 3):
            last = attempt == 2
            tally.answered(scan_id, Fate.DEAD_LETTERED if last and scan_id > 1 else Fate.RETRYING)
    tally.answered(1, Fate.FINISHED)
    assert tally.words() == "3 scans in 10 attempts: 1 finished, 2 dead letters"
    assert tally.log_fields() == {
        "scans": 3, "attempts": 10, "finished": 1, "failed": 0, "dead_lettered": 2,
        "retrying": 0, "attempt_failed": 0, "refused": 0, "unreported": 0,
    }  # fmt: skip


def test_every_fate_is_told_in_the_number_it_has() -> None:
    tally = WorkerTally()
    for scan_id, fate in enumerate(Fate):
        tally.answered(scan_id, fate)
        tally.answered(100 + scan_id, fate)
    tally.unreported(200)
    assert tally.words() == (
        "15 scans in 14 attempts: 2 finished, 2 permanent failures, 2 dead letters, "
        "2 waiting for a retry, 2 failed (the reply did not say how), 2 results refused, "
        "3 not reported"
    )
    assert WorkerTally().words() == "0 scans in 0 attempts"


def test_a_scan_left_unreported_after_a_retry_is_told_by_its_last_fate() -> None:
    tally = WorkerTally()
    tally.answered(7, Fate.RETRYING)
    tally.unreported(7)  # leased again, then its lease was lost
    assert tally.words() == "1 scan in 1 attempt: 1 not reported"
