"""A snapshot of the whole fleet: live scans by queue state, outcome totals, the oldest due
scan and each source's last accepted submission, for the metrics reconciliation and
`mainframe stats`.

Every query walks a partial index over live scans or the outcome totals, never the
finished history, so its cost follows the backlog rather than the size of the table (the
sources are read from the credentials owners issued, a few pages). The
live states are judged by `mf_now()`, the database's clock, as leasing judges them."""

from __future__ import annotations

from dataclasses import dataclass

from mainframe.lifecycle.rules import QueueState
from mainframe.store.accounts import submissions, totals
from mainframe.store.accounts.submissions import LastSubmission
from mainframe.store.engine.database import Tx, first, value
from mainframe.store.engine.statements import statement

QUEUED_STATES = statement("queued_states")
PENDING_STATES = statement("pending_states")
QUARANTINED_COUNT = statement("quarantined_count")
OLDEST_DUE = statement("oldest_due")


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Terminal outcomes (non-overlapping), live scans by queue state, the oldest backlog,
    and the sources of live endpoints with their last accepted submission."""

    taken_at: int
    outcomes: dict[str, int]
    queue: dict[QueueState, int]
    oldest_due_at: int | None  # when the longest-waiting scan a poll could lease became due
    sources: tuple[LastSubmission, ...] = ()


async def snapshot(tx: Tx, *, max_attempts: int) -> Snapshot:
    queued = await first(tx, QUEUED_STATES)
    pending = await first(tx, PENDING_STATES, {"max_attempts": max_attempts})
    assert queued is not None and pending is not None
    total, waiting, parked, unparked, held_waiting = (
        int(queued[column] or 0)
        for column in ("total", "waiting", "parked", "unparked", "held_waiting")
    )
    lapsed, spent = int(pending["lapsed"] or 0), int(pending["spent"] or 0)
    # A paused queue's unparked scans are counted once, as paused, whether due or waiting.
    paused, scheduled = parked + unparked, waiting - held_waiting
    queue = {
        QueueState.QUEUED: total - paused - scheduled,
        QueueState.PAUSED: paused,
        QueueState.SCHEDULED: scheduled,
        QueueState.QUARANTINED: int(await value(tx, QUARANTINED_COUNT) or 0),
        QueueState.PENDING: int(pending["total"]) - lapsed - spent,
        QueueState.RETRYABLE: lapsed,
        QueueState.EXHAUSTED: spent,
    }
    oldest = await value(tx, OLDEST_DUE)
    outcomes, sources = await totals.read(tx), await submissions.read(tx)
    return Snapshot(int(queued["now"]), outcomes, queue, oldest, sources)
