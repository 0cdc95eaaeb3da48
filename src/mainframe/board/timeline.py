"""A scan's history as the board shows it: every attempt as its worker saw it, and a mark
where each redrive started a fresh attempt budget.

A redrive raises `attempt_base` and restarts `attempt_count` (store/operator/redrive.py), so the
worker's attempt number starts again at 1 while the history's `seq` keeps rising: an
attempt numbered 1 at a seq above 1 is the first of a budget a redrive opened. Only the last
redrive's time is stored (`redriven_at`); the audit trail holds the others."""

from __future__ import annotations

from dataclasses import dataclass

from mainframe.lifecycle.scans import AttemptRecord, ScanRecord


@dataclass(frozen=True, slots=True)
class Entry:
    """One line of the timeline: an attempt, or a redrive (`attempt` None) opening `budget`."""

    budget: int  # 1 for the budget the scan was submitted with, then one more per redrive
    attempt: AttemptRecord | None = None
    redriven_at: int | None = None  # known for the latest redrive only


def entries(scan: ScanRecord) -> list[Entry]:
    """The scan's attempts in order, with a redrive mark before each budget after the first."""
    found: list[Entry] = []
    budget = 1
    for attempt in scan.attempts:
        if attempt.attempt == 1 and attempt.seq > 1:
            budget += 1
            found.append(Entry(budget))
        found.append(Entry(budget, attempt))
    if scan.redrive_count >= budget:
        found.append(Entry(budget + 1))  # redriven and not leased since
    marks = [i for i, entry in enumerate(found) if entry.attempt is None]
    if marks and scan.redriven_at is not None:
        last = marks[-1]
        found[last] = Entry(found[last].budget, None, scan.redriven_at)
    return found
