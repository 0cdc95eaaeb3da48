"""The statements that read an owner's scans: one scan with its attempt history, and
keyset-paged, filtered lists and counts of the scans of its endpoints. A scan of another
owner is never found (existence is not revealed)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from mainframe.lifecycle.rules import Status
from mainframe.lifecycle.scans import AttemptRecord, ScanRecord, attempt_from_row, scan_from_row
from mainframe.store.engine.database import NotFound, Row, Tx, first, value
from mainframe.store.engine.statements import statement
from mainframe.store.work import search

OWNED_SCAN = statement("owned_scan")
ATTEMPTS_OF_SCAN = statement("attempts_of_scan")
# The keyset of the first page: older than every scan.
NEWEST = 2**63 - 1

LIST_SCANS = statement("list_scans")
LIST_SCANS_NEWER = statement("list_scans_newer")
COUNT_SCANS = statement("count_scans")


def _listed(row: Row) -> ScanRecord:
    """A scan from a row of its columns and its endpoint's name (`endpoint`)."""
    return scan_from_row(row, row["endpoint"])


async def owned_scan(tx: Tx, owner_id: int, scan_id: int) -> ScanRecord:
    """The scan with its history if one of the owner's endpoints holds it; NotFound if not."""
    row = await first(tx, OWNED_SCAN, {"scan": scan_id, "owner": owner_id})
    if row is None:
        raise NotFound(f"no scan {scan_id}")
    scan = _listed(row)
    history = [attempt_from_row(r) for r in await tx.rows(ATTEMPTS_OF_SCAN, {"scan": scan_id})]
    if scan.status is Status.PENDING and scan.assignment_id is not None:
        history.append(_open_attempt(scan))
    return replace(scan, attempts=tuple(history))


def _open_attempt(scan: ScanRecord) -> AttemptRecord:
    return AttemptRecord(
        scan.attempt_base + scan.attempt_count,
        scan.attempt_count,
        scan.worker,
        scan.leased_at,
        None,
        None,
        scan.wait_reason,
        None,
    )


@dataclass(frozen=True, slots=True)
class ListingFilter:
    """What narrows a listing of scans; every field optional. `dead` True keeps dead letters
    only, False everything else; `q` is a search (store/work/search.py); `paused` True keeps the
    QUEUED scans a paused queue holds, False everything else."""

    endpoint: str | None = None
    status: str | None = None
    queue: str | None = None
    dead: bool | None = None
    q: str | None = None
    paused: bool | None = None

    def params(self, owner_id: int) -> dict[str, Any]:
        return {
            "owner": owner_id,
            "endpoint": self.endpoint,
            "status": self.status,
            "queue": self.queue,
            "dead": self.dead,
            "paused": self.paused,
        } | search.terms(self.q)


@dataclass(frozen=True, slots=True)
class ScanPage:
    items: list[ScanRecord]
    older_than: int | None  # the last item's id, when a full page may have more after it
    newer_than: int | None  # the first item's id, for the page before; None on the first


async def list_scans(
    tx: Tx,
    owner_id: int,
    *,
    endpoint: str | None,
    status: str | None,
    queue: str | None,
    before_id: int | None,
    limit: int,
    dead: bool | None = None,
    q: str | None = None,
) -> list[ScanRecord]:
    """Newest first, `limit` scans older than `before_id`, over the owner's endpoints; `dead`
    True lists dead letters only, False everything else; `q` searches (store/work/search.py)."""
    f = ListingFilter(endpoint, status, queue, dead, q)
    params = f.params(owner_id) | {
        "before": NEWEST if before_id is None else before_id, "limit": limit,
    }  # fmt: skip
    return [_listed(row) for row in await tx.rows(LIST_SCANS, params)]


async def scan_page(
    tx: Tx,
    owner_id: int,
    f: ListingFilter,
    *,
    before_id: int | None,
    newer_than: int | None,
    limit: int,
) -> ScanPage:
    """A page newest first older than `before_id`, or the page just before the scan
    `newer_than` (the first page when fewer than a page lie above it)."""
    if newer_than is not None:
        params = f.params(owner_id) | {"newer_than": newer_than, "limit": limit + 1}
        rows = await tx.rows(LIST_SCANS_NEWER, params)
        if len(rows) > limit:
            items = [_listed(row) for row in reversed(rows[:limit])]
            return ScanPage(items, items[-1].id, items[0].id)
        before_id = None
    params = f.params(owner_id) | {
        "before": NEWEST if before_id is None else before_id, "limit": limit,
    }  # fmt: skip
    items = [_listed(row) for row in await tx.rows(LIST_SCANS, params)]
    older = items[-1].id if len(items) == limit else None
    newer = items[0].id if before_id is not None and items else None
    return ScanPage(items, older, newer)


async def count_scans(tx: Tx, owner_id: int, f: ListingFilter, *, cap: int) -> int:
    """How many scans the filter matches, counted up to `cap`."""
    params = f.params(owner_id) | {"before": NEWEST, "limit": cap}
    return int(await value(tx, COUNT_SCANS, params) or 0)
