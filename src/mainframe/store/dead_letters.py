"""The operator's listing of dead letters: every scan in FAILED that will never be retried,
across the endpoints an owner holds, newest first, searchable, with its final attempt.

Every query carries `dead_lettered_at IS NOT NULL` as written in the partial indexes'
predicate, so both planners can use them: `ix_scans_dead_recent` (dead_lettered_at, id)
walks the listing's order, `ix_scans_dead_letters` (endpoint_id, dead_lettered_at, id) one
endpoint's, and `ix_scans_dead_search` (trigrams, PostgreSQL) a substring search. The count
without a search or a narrowing filter is the outcome totals' sum, never a scan count."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Connection, Select, and_, false, func, select, tuple_

from mainframe.store import accounts, audit, queries, search, totals
from mainframe.store.audit import AuditEntry
from mainframe.store.errors import Conflict
from mainframe.store.records import AttemptRecord, ScanRecord, scan_from_row
from mainframe.store.redrive import Progress, Redriven, redrive
from mainframe.store.schema import attempts, scans
from mainframe.store.search import MAX_QUERY_LENGTH
from mainframe.store.uow import UnitOfWork

__all__ = ["MAX_QUERY_LENGTH", "DeadLetterFilter", "DeadLetters"]


@dataclass(frozen=True, slots=True)
class DeadLetterFilter:
    """What narrows the listing; every field optional. `since` is microseconds."""

    q: str | None = None
    reason: str | None = None
    since: int | None = None
    endpoint: str | None = None
    queue: str | None = None

    @property
    def narrows(self) -> bool:
        """Whether the count must read scans (anything beyond a choice of endpoint)."""
        return bool(self.q) or any(v is not None for v in (self.reason, self.since, self.queue))

    def as_json(self) -> dict[str, Any]:
        return {
            "q": self.q,
            "reason": self.reason,
            "since": self.since,
            "endpoint": self.endpoint,
            "queue": self.queue,
        }


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A dead letter as listed: the scan and the attempt that closed it (None if none)."""

    scan: ScanRecord
    final_attempt: AttemptRecord | None


@dataclass(frozen=True, slots=True)
class DeadLetterPage:
    items: list[DeadLetter]
    next_cursor: tuple[int, int] | None  # (dead_lettered_at, id) of the last item
    count: int


def scoped_endpoints(conn: Connection, owner_id: int, endpoint: str | None) -> dict[int, str]:
    """The owner's endpoints, or just the named one (empty when it is not the owner's)."""
    owned = accounts.owned_endpoints(conn, owner_id)
    if endpoint is None:
        return owned
    return {k: v for k, v in owned.items() if v == endpoint}


def conditions(endpoint_ids: list[int], f: DeadLetterFilter) -> list[ColumnElement[bool]]:
    """The WHERE terms of a filter over the given endpoints."""
    if not endpoint_ids:
        return [false()]
    where: list[ColumnElement[bool]] = [
        scans.c.endpoint_id.in_(endpoint_ids),
        # Rendered as the partial indexes' predicate, a literal the planners can prove.
        scans.c.dead_lettered_at.is_not(None),
    ]
    if f.q:
        where.append(search.matches(f.q))
    if f.reason is not None:
        where.append(scans.c.fail_reason == f.reason)
    if f.since is not None:
        where.append(scans.c.dead_lettered_at >= f.since)
    if f.queue is not None:
        where.append(scans.c.queue == f.queue)
    return where


def count(conn: Connection, endpoints: dict[int, str], f: DeadLetterFilter) -> int:
    """How many dead letters match: the totals' sum unless the filter narrows."""
    if not f.narrows:
        return sum(totals.dead_letters_of(conn, endpoints).values())
    query = select(func.count()).select_from(scans).where(*conditions(list(endpoints), f))
    return int(conn.scalar(query) or 0)


def matching_ids(conn: Connection, endpoints: dict[int, str], f: DeadLetterFilter) -> list[int]:
    """Every matching dead letter's id, newest first (what a filter redrive requeues)."""
    query = (
        select(scans.c.id)
        .where(*conditions(list(endpoints), f))
        .order_by(scans.c.dead_lettered_at.desc(), scans.c.id.desc())
    )
    return [int(row[0]) for row in conn.execute(query)]


def page_query(
    endpoints: dict[int, str],
    f: DeadLetterFilter,
    *,
    after: tuple[int, int] | None,
    limit: int,
) -> Select[Any]:
    """The statement of one page newest first, strictly after the keyset `after`, each row
    with its final attempt."""
    where = conditions(list(endpoints), f)
    if after is not None:
        # New dead letters sort before every cursor, so pages already read never shift.
        where.append(tuple_(scans.c.dead_lettered_at, scans.c.id) < tuple_(*after))
    final = attempts.alias("final")
    source: Any = scans
    if f.q:
        # A search finds its matches first (trigram bitmap on PostgreSQL), then sorts them:
        # walking the listing's order instead would read every dead letter for a rare term.
        matched = select(scans.c.id).where(*where).cte("matched").prefix_with("MATERIALIZED")
        source = scans.join(matched, matched.c.id == scans.c.id)
        where = []
    return (
        select(scans, *[final.c[name].label(f"final_{name}") for name in _FINAL])
        .select_from(
            source.outerjoin(
                final,
                and_(
                    final.c.scan_id == scans.c.id,
                    final.c.seq == scans.c.attempt_base + scans.c.attempt_count,
                ),
            )
        )
        .where(*where)
        .order_by(scans.c.dead_lettered_at.desc(), scans.c.id.desc())
        .limit(limit)
    )


def page(
    conn: Connection,
    endpoints: dict[int, str],
    f: DeadLetterFilter,
    *,
    after: tuple[int, int] | None,
    limit: int,
) -> DeadLetterPage:
    """One page newest first, strictly after the keyset `after`, with the total count."""
    query = page_query(endpoints, f, after=after, limit=limit)
    items = [_dead_letter(row, endpoints) for row in conn.execute(query)]
    last = items[-1].scan if len(items) == limit else None
    cursor = None if last is None else (int(last.dead_lettered_at or 0), last.id)
    return DeadLetterPage(items, cursor, count(conn, endpoints, f))


_FINAL = ("seq", "attempt", "worker", "leased_at", "closed_at", "outcome", "summary", "artifact")


def _dead_letter(row: Any, endpoints: dict[int, str]) -> DeadLetter:
    m = row._mapping
    scan = scan_from_row(row, endpoints[m["endpoint_id"]])
    if m["final_seq"] is None:
        return DeadLetter(scan, None)
    return DeadLetter(scan, AttemptRecord(*(m[f"final_{name}"] for name in _FINAL)))


class DeadLetters:
    """The owner's dead letters: list, count, open one, redrive, and the audit trail."""

    def __init__(self, uow: UnitOfWork) -> None:
        self.uow = uow

    def page(
        self, owner_id: int, f: DeadLetterFilter, *, after: tuple[int, int] | None, limit: int
    ) -> DeadLetterPage:
        with self.uow.read() as tx:
            owned = scoped_endpoints(tx.conn, owner_id, f.endpoint)
            return page(tx.conn, owned, f, after=after, limit=limit)

    def count(self, owner_id: int, f: DeadLetterFilter) -> int:
        with self.uow.read() as tx:
            return count(tx.conn, scoped_endpoints(tx.conn, owner_id, f.endpoint), f)

    def get(self, owner_id: int, scan_id: int) -> ScanRecord:
        """The scan with its whole attempt history (any status: a redriven one too)."""
        with self.uow.read() as tx:
            return queries.owned_scan(tx.conn, owner_id, scan_id)

    def redrive_ids(
        self, owner_id: int, ids: Sequence[int], *, progress: Progress | None = None
    ) -> Redriven:
        return redrive(self.uow, owner_id, ids, by="ids", progress=progress)

    def redrive_filter(
        self,
        owner_id: int,
        f: DeadLetterFilter,
        *,
        confirm: int,
        progress: Progress | None = None,
    ) -> Redriven:
        """Redrive what the filter matches, refused (nothing changed) unless `confirm` is
        how many it matches now: a stale screen cannot requeue more than the operator saw."""
        with self.uow.read() as tx:
            ids = matching_ids(tx.conn, scoped_endpoints(tx.conn, owner_id, f.endpoint), f)
        if len(ids) != confirm:
            raise Conflict(
                "count_changed",
                f"the filter matches {len(ids)} dead letters now, not {confirm}; "
                "look again and confirm the new count",
            )
        filter_json = f.as_json()
        return redrive(
            self.uow, owner_id, ids, by="filter", filter_json=filter_json, progress=progress
        )

    def audit(self, owner_id: int, *, before_id: int | None, limit: int) -> list[AuditEntry]:
        with self.uow.read() as tx:
            return audit.entries(tx.conn, owner_id, before_id=before_id, limit=limit)
