"""The statements that read an owner's scans: one scan with its attempt history, and
keyset-paged, filtered lists and counts of the scans of its endpoints. A scan of another
owner is never found (existence is not revealed)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from mainframe.lifecycle.rules import Status
from mainframe.lifecycle.scans import (
    SCAN_COLUMNS,
    AttemptRecord,
    ScanRecord,
    attempt_from_row,
    scan_from_row,
)
from mainframe.store.engine.database import Row, Sql, Tx, first, value
from mainframe.store.engine.errors import NotFound
from mainframe.store.work import search

OWNED_SCAN = Sql(
    "owned_scan",
    """
    SELECT scans.id, scans.endpoint_id, scans.queue, scans.name, scans.version, scans.kind,
           scans.payload, scans.status, scans.verified, scans.source, scans.worker,
           scans.attempt_count, scans.assignment_id, scans.leased_at, scans.lease_expires_at,
           scans.wait_reason, scans.created_at, scans.updated_at, scans.finished_at,
           scans.dead_lettered_at, scans.fail_reason, scans.result, scans.attempt_base,
           scans.available_at, scans.redriven_at, scans.redrive_count, endpoints.name
    FROM scans JOIN endpoints ON endpoints.id = scans.endpoint_id
    WHERE scans.id = :scan AND endpoints.owner_id = :owner
    """,
)
ATTEMPTS_OF_SCAN = Sql(
    "attempts_of_scan",
    """
    SELECT seq, attempt, worker, leased_at, closed_at, outcome, summary, artifact
    FROM attempts WHERE scan_id = :scan ORDER BY seq
    """,
)
# The keyset of the first page: older than every scan.
NEWEST = 2**63 - 1

# Newest first over the owner's endpoints (or the one named), each filter optional (NULL: any),
# strictly older than the keyset :before (always bound: an optional keyset is an OR no planner can
# seek through, and PostgreSQL would read every scan and sort them). :dead TRUE keeps dead letters
# only, FALSE everything else; :paused TRUE keeps the QUEUED scans a pause holds
# (lifecycle.rules.queue_state: in a paused queue, or still parked), FALSE everything else, each
# one's queue looked up by paused_queues' key; :pattern is a search (store/work/search.py) over
# name, source and kind, or :term_id the scan's id. Walks the primary key backwards from :before and
# stops after :limit rows; CROSS JOIN keeps scans the outer loop on SQLite, which would otherwise
# start from the owner's endpoints and sort every scan they hold.
LIST_SCANS = Sql(
    "list_scans",
    """
    SELECT scans.id, scans.endpoint_id, scans.queue, scans.name, scans.version, scans.kind,
           scans.payload, scans.status, scans.verified, scans.source, scans.worker,
           scans.attempt_count, scans.assignment_id, scans.leased_at, scans.lease_expires_at,
           scans.wait_reason, scans.created_at, scans.updated_at, scans.finished_at,
           scans.dead_lettered_at, scans.fail_reason, scans.result, scans.attempt_base,
           scans.available_at, scans.redriven_at, scans.redrive_count, endpoints.name
    FROM scans CROSS JOIN endpoints
    WHERE endpoints.id = scans.endpoint_id AND endpoints.owner_id = :owner
      AND (:endpoint IS NULL OR endpoints.name = :endpoint)
      AND (:status IS NULL OR scans.status = :status)
      AND (:queue IS NULL OR scans.queue = :queue)
      AND (:dead IS NULL OR (scans.dead_lettered_at IS NOT NULL) = :dead)
      AND (:paused IS NULL OR (scans.status = 'QUEUED' AND (
          scans.available_at IS NULL OR EXISTS (
              SELECT 1 FROM paused_queues WHERE paused_queues.endpoint_id = scans.endpoint_id
                AND paused_queues.queue = scans.queue
          ))) = :paused)
      AND (:pattern IS NULL OR scans.name LIKE :pattern ESCAPE '\\'
           OR scans.source LIKE :pattern ESCAPE '\\' OR scans.kind LIKE :pattern ESCAPE '\\'
           OR scans.id = :term_id)
      AND scans.id < :before
    ORDER BY scans.id DESC LIMIT :limit
    """,
    """
    SELECT scans.id, scans.endpoint_id, scans.queue, scans.name, scans.version, scans.kind,
           scans.payload, scans.status, scans.verified, scans.source, scans.worker,
           scans.attempt_count, scans.assignment_id, scans.leased_at, scans.lease_expires_at,
           scans.wait_reason, scans.created_at, scans.updated_at, scans.finished_at,
           scans.dead_lettered_at, scans.fail_reason, scans.result, scans.attempt_base,
           scans.available_at, scans.redriven_at, scans.redrive_count, endpoints.name
    FROM scans CROSS JOIN endpoints
    WHERE endpoints.id = scans.endpoint_id AND endpoints.owner_id = :owner
      AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint)
      AND (CAST(:status AS text) IS NULL OR scans.status = :status)
      AND (CAST(:queue AS text) IS NULL OR scans.queue = :queue)
      AND (CAST(:dead AS boolean) IS NULL OR (scans.dead_lettered_at IS NOT NULL) = :dead)
      AND (CAST(:paused AS boolean) IS NULL OR (scans.status = 'QUEUED' AND (
          scans.available_at IS NULL OR EXISTS (
              SELECT 1 FROM paused_queues WHERE paused_queues.endpoint_id = scans.endpoint_id
                AND paused_queues.queue = scans.queue
          ))) = :paused)
      AND (CAST(:pattern AS text) IS NULL OR scans.name ILIKE :pattern ESCAPE '\\'
           OR scans.source ILIKE :pattern ESCAPE '\\' OR scans.kind ILIKE :pattern ESCAPE '\\'
           OR scans.id = :term_id)
      AND scans.id < :before
    ORDER BY scans.id DESC LIMIT :limit
    """,
)
# The way back from a later page: the scans newer than :newer_than, oldest first, walking
# the primary key forwards; the caller reverses them.
LIST_SCANS_NEWER = Sql(
    "list_scans_newer",
    """
    SELECT scans.id, scans.endpoint_id, scans.queue, scans.name, scans.version, scans.kind,
           scans.payload, scans.status, scans.verified, scans.source, scans.worker,
           scans.attempt_count, scans.assignment_id, scans.leased_at, scans.lease_expires_at,
           scans.wait_reason, scans.created_at, scans.updated_at, scans.finished_at,
           scans.dead_lettered_at, scans.fail_reason, scans.result, scans.attempt_base,
           scans.available_at, scans.redriven_at, scans.redrive_count, endpoints.name
    FROM scans CROSS JOIN endpoints
    WHERE endpoints.id = scans.endpoint_id AND endpoints.owner_id = :owner
      AND (:endpoint IS NULL OR endpoints.name = :endpoint)
      AND (:status IS NULL OR scans.status = :status)
      AND (:queue IS NULL OR scans.queue = :queue)
      AND (:dead IS NULL OR (scans.dead_lettered_at IS NOT NULL) = :dead)
      AND (:paused IS NULL OR (scans.status = 'QUEUED' AND (
          scans.available_at IS NULL OR EXISTS (
              SELECT 1 FROM paused_queues WHERE paused_queues.endpoint_id = scans.endpoint_id
                AND paused_queues.queue = scans.queue
          ))) = :paused)
      AND (:pattern IS NULL OR scans.name LIKE :pattern ESCAPE '\\'
           OR scans.source LIKE :pattern ESCAPE '\\' OR scans.kind LIKE :pattern ESCAPE '\\'
           OR scans.id = :term_id)
      AND scans.id > :newer_than
    ORDER BY scans.id LIMIT :limit
    """,
    """
    SELECT scans.id, scans.endpoint_id, scans.queue, scans.name, scans.version, scans.kind,
           scans.payload, scans.status, scans.verified, scans.source, scans.worker,
           scans.attempt_count, scans.assignment_id, scans.leased_at, scans.lease_expires_at,
           scans.wait_reason, scans.created_at, scans.updated_at, scans.finished_at,
           scans.dead_lettered_at, scans.fail_reason, scans.result, scans.attempt_base,
           scans.available_at, scans.redriven_at, scans.redrive_count, endpoints.name
    FROM scans CROSS JOIN endpoints
    WHERE endpoints.id = scans.endpoint_id AND endpoints.owner_id = :owner
      AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint)
      AND (CAST(:status AS text) IS NULL OR scans.status = :status)
      AND (CAST(:queue AS text) IS NULL OR scans.queue = :queue)
      AND (CAST(:dead AS boolean) IS NULL OR (scans.dead_lettered_at IS NOT NULL) = :dead)
      AND (CAST(:paused AS boolean) IS NULL OR (scans.status = 'QUEUED' AND (
          scans.available_at IS NULL OR EXISTS (
              SELECT 1 FROM paused_queues WHERE paused_queues.endpoint_id = scans.endpoint_id
                AND paused_queues.queue = scans.queue
          ))) = :paused)
      AND (CAST(:pattern AS text) IS NULL OR scans.name ILIKE :pattern ESCAPE '\\'
           OR scans.source ILIKE :pattern ESCAPE '\\' OR scans.kind ILIKE :pattern ESCAPE '\\'
           OR scans.id = :term_id)
      AND scans.id > :newer_than
    ORDER BY scans.id LIMIT :limit
    """,
)
# How many scans a listing's filter matches, counted up to :limit: the listing's own walk of
# the primary key, so a count under a search costs what a page of it costs, never more.
COUNT_SCANS = Sql(
    "count_scans",
    """
    SELECT count(*) FROM (
    SELECT scans.id
    FROM scans CROSS JOIN endpoints
    WHERE endpoints.id = scans.endpoint_id AND endpoints.owner_id = :owner
      AND (:endpoint IS NULL OR endpoints.name = :endpoint)
      AND (:status IS NULL OR scans.status = :status)
      AND (:queue IS NULL OR scans.queue = :queue)
      AND (:dead IS NULL OR (scans.dead_lettered_at IS NOT NULL) = :dead)
      AND (:paused IS NULL OR (scans.status = 'QUEUED' AND (
          scans.available_at IS NULL OR EXISTS (
              SELECT 1 FROM paused_queues WHERE paused_queues.endpoint_id = scans.endpoint_id
                AND paused_queues.queue = scans.queue
          ))) = :paused)
      AND (:pattern IS NULL OR scans.name LIKE :pattern ESCAPE '\\'
           OR scans.source LIKE :pattern ESCAPE '\\' OR scans.kind LIKE :pattern ESCAPE '\\'
           OR scans.id = :term_id)
      AND scans.id < :before
    ORDER BY scans.id DESC LIMIT :limit
    ) AS capped
    """,
    """
    SELECT count(*) FROM (
    SELECT scans.id
    FROM scans CROSS JOIN endpoints
    WHERE endpoints.id = scans.endpoint_id AND endpoints.owner_id = :owner
      AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint)
      AND (CAST(:status AS text) IS NULL OR scans.status = :status)
      AND (CAST(:queue AS text) IS NULL OR scans.queue = :queue)
      AND (CAST(:dead AS boolean) IS NULL OR (scans.dead_lettered_at IS NOT NULL) = :dead)
      AND (CAST(:paused AS boolean) IS NULL OR (scans.status = 'QUEUED' AND (
          scans.available_at IS NULL OR EXISTS (
              SELECT 1 FROM paused_queues WHERE paused_queues.endpoint_id = scans.endpoint_id
                AND paused_queues.queue = scans.queue
          ))) = :paused)
      AND (CAST(:pattern AS text) IS NULL OR scans.name ILIKE :pattern ESCAPE '\\'
           OR scans.source ILIKE :pattern ESCAPE '\\' OR scans.kind ILIKE :pattern ESCAPE '\\'
           OR scans.id = :term_id)
      AND scans.id < :before
    ORDER BY scans.id DESC LIMIT :limit
    ) AS capped
    """,
)


def _listed(row: Row) -> ScanRecord:
    """A scan from a row of its columns and then its endpoint's name."""
    (endpoint,) = row[len(SCAN_COLUMNS) :]
    return scan_from_row(row, endpoint)


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
