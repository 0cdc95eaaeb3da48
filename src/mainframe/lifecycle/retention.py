"""Retention as pure decisions: which kinds of row are kept how long after they ended, and
whether one is due for pruning at a given instant. The store's pruning statements are the
SQL twins of `is_due` (tests/integration/test_sql_twins.py holds them equal); the database's
clock supplies `now`. No database, no clock.

What ended when: a finished or plainly failed scan at `finished_at`, a dead letter at
`dead_lettered_at` (a redrive clears it, so a redriven scan is no dead letter), an audit row
at `at`, a minute of delivery counts at the minute's end, a board session at `expires_at`.
Live scans never end, so they are never due. A scan's attempts go with it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from mainframe.lifecycle.rules import PruneKind, Status

DAY_US = 86_400 * 1_000_000
# A row of delivery counts holds one minute; it ends when the minute does, so even a
# retention of 0 never prunes the minute the dispatcher is still adding to.
DELIVERY_MINUTE_US = 60 * 1_000_000


# The kinds of scan, whose attempts are pruned with them.
SCAN_KINDS = (PruneKind.FINISHED, PruneKind.FAILED, PruneKind.DEAD_LETTERED)
# The kinds that have a retention of their own, in the order a pass prunes them.
RETAINED = (*SCAN_KINDS, PruneKind.AUDIT, PruneKind.DELIVERY_COUNTS, PruneKind.BOARD_SESSIONS)


# The default retentions in days (the README's Settings; docs/reliability.md says more).
# A finished scan's result, looked up after the fact: a week, a weekend included.
FINISHED_DAYS = 7.0
# A plain failure, investigated at leisure: a month.
FAILED_DAYS = 30.0
# A dead letter waits for an operator's decision (redrive or not): a quarter, holidays
# included. Its alert fired when it was dead-lettered; the totals keep counting it.
DEAD_LETTER_DAYS = 90.0
# Who changed what: a year of the audit trail.
AUDIT_DAYS = 365.0
# Per-minute delivery counts: far above the watcher's longest lookback (7 days) and the stats
# API's 24-hour window, and enough for a month-over-month comparison on a 31-day month.
DELIVERY_DAYS = 35.0
# An ended board session: a browser back the next morning is told its session ended (its
# cookie outlives the session by as long, store/accounts/sessions.py).
BOARD_SESSION_DAYS = 1.0


def kept_us(days: float | None) -> int | None:
    """A retention in days as microseconds; None (kept forever) stays None."""
    return None if days is None else round(days * DAY_US)


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """How long each kind is kept after it ended, in microseconds; None keeps it forever."""

    finished: int | None = kept_us(FINISHED_DAYS)
    failed: int | None = kept_us(FAILED_DAYS)
    dead_lettered: int | None = kept_us(DEAD_LETTER_DAYS)
    audit: int | None = kept_us(AUDIT_DAYS)
    delivery_counts: int | None = kept_us(DELIVERY_DAYS)
    board_sessions: int | None = kept_us(BOARD_SESSION_DAYS)

    @classmethod
    def of_days(
        cls,
        *,
        finished: float | None,
        failed: float | None,
        dead_lettered: float | None,
        audit: float | None,
        delivery_counts: float | None,
        board_sessions: float | None,
    ) -> RetentionPolicy:
        return cls(
            finished=kept_us(finished),
            failed=kept_us(failed),
            dead_lettered=kept_us(dead_lettered),
            audit=kept_us(audit),
            delivery_counts=kept_us(delivery_counts),
            board_sessions=kept_us(board_sessions),
        )

    @classmethod
    def uniform(cls, kept: int | None) -> RetentionPolicy:
        """Every kind kept `kept` microseconds (0: pruned at once; None: kept forever)."""
        return cls(kept, kept, kept, kept, kept, kept)

    def kept(self, kind: PruneKind) -> int | None:
        """How long `kind` is kept; attempts follow their scan, so they have no retention."""
        if kind is PruneKind.ATTEMPTS:
            raise ValueError("attempts are kept as long as their scan")
        found: int | None = getattr(self, kind.value)
        return found

    def pruned(self) -> tuple[PruneKind, ...]:
        """The kinds with a retention (not kept forever), in pruning order."""
        return tuple(kind for kind in RETAINED if self.kept(kind) is not None)


def is_due(ended_at_us: int | None, *, now_us: int, kept: int | None) -> bool:
    """Whether a row that ended at `ended_at_us` (None: has not ended) has been kept for
    `kept` microseconds at `now_us` (None: kept forever)."""
    if ended_at_us is None or kept is None:
        return False
    return ended_at_us <= now_us - kept


def scan_kind(status: str, dead_lettered_at: int | None) -> PruneKind | None:
    """Which retention a scan falls under; None for a live scan, never pruned."""
    if status == Status.FINISHED:
        return PruneKind.FINISHED
    if status == Status.FAILED:
        return PruneKind.FAILED if dead_lettered_at is None else PruneKind.DEAD_LETTERED
    return None


def scan_is_due(
    *,
    status: str,
    finished_at: int | None,
    dead_lettered_at: int | None,
    now_us: int,
    policy: RetentionPolicy,
) -> bool:
    """Whether a scan (and its attempts) is due for pruning: a dead letter by its own
    retention from when it was dead-lettered, any other ended scan from when it ended."""
    kind = scan_kind(status, dead_lettered_at)
    if kind is None:
        return False
    ended = dead_lettered_at if kind is PruneKind.DEAD_LETTERED else finished_at
    return is_due(ended, now_us=now_us, kept=policy.kept(kind))


def pruned_counts(kind: PruneKind, endpoint_ids: Iterable[int]) -> list[dict[str, int | str]]:
    """What a batch that removed scans of `kind` (one of each endpoint id given per scan) adds
    to the pruned counts, per endpoint, under the outcome total's name (the kind's own); in
    endpoint order, so two pruners never take the rows in opposite orders."""
    if kind not in SCAN_KINDS:
        raise ValueError(f"{kind} is not a kind of scan")
    removed = Counter(endpoint_ids)
    return [
        {"endpoint": endpoint_id, "outcome": kind.value, "n": n}
        for endpoint_id, n in sorted(removed.items())
    ]


def delivery_minute_is_due(minute_us: int, *, now_us: int, kept: int | None) -> bool:
    """Whether the delivery counts of the minute starting at `minute_us` are due."""
    return is_due(minute_us + DELIVERY_MINUTE_US, now_us=now_us, kept=kept)
