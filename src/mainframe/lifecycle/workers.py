"""Which worker of an endpoint fails far more than the others: a pure rule over the last
hour's counts, so the board can mark a host whose disk is full before its dead letters pile
up. No database, no clock."""

from __future__ import annotations

# A worker is judged only once it closed this many attempts in the hour: three failures out
# of four say little.
MIN_ATTEMPTS = 10
# It stands out when its failure share is at least this many times the rest's, and at least
# this much above it (so 2 % against 1 % is not a finding).
TIMES_THE_REST = 2.0
POINTS_ABOVE = 0.25


def failure_share(failed: int, finished: int, lapsed: int = 0) -> float | None:
    """The share of closed attempts that failed or lapsed; None with nothing closed."""
    closed = failed + finished + lapsed
    return None if closed == 0 else (failed + lapsed) / closed


def stands_out(*, worker: tuple[int, int, int], endpoint: tuple[int, int, int]) -> bool:
    """Whether a worker's (failed, finished, lapsed) in the hour is far above the rest of
    its endpoint's; `endpoint` counts every worker, this one included."""
    failed, finished, lapsed = worker
    if failed + finished + lapsed < MIN_ATTEMPTS:
        return False
    rest = tuple(e - w for e, w in zip(endpoint, worker, strict=True))
    mine = failure_share(failed, finished, lapsed)
    theirs = failure_share(*rest)
    if mine is None or theirs is None:
        return False  # nobody else to compare with
    return mine >= TIMES_THE_REST * theirs and mine >= theirs + POINTS_ABOVE
