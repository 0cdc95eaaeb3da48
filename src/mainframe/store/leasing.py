"""The job poll: reap lapsed scans whose budget is spent, reclaim lapsed ones that still have
budget, then lease the oldest QUEUED scans. Rows are claimed with FOR UPDATE SKIP LOCKED on
PostgreSQL (ignored by SQLite, where BEGIN IMMEDIATE already serialises writers)."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    Connection,
    Integer,
    String,
    bindparam,
    cast,
    insert,
    literal,
    select,
    union_all,
    update,
)

from mainframe.lifecycle.events import (
    AttemptFailed,
    FinalAttempt,
    ScanDeadLettered,
    ScanRef,
)
from mainframe.lifecycle.rules import Status, lapse_dead_letter_reason, lapse_outcome
from mainframe.store.schema import attempts, endpoints, scans

JOB_COLUMNS = (
    scans.c.id,
    scans.c.name,
    scans.c.version,
    scans.c.kind,
    scans.c.queue,
    scans.c.payload,
    scans.c.attempt_count,
    scans.c.assignment_id,
    scans.c.lease_expires_at,
)
LAPSED_COLUMNS = (
    scans.c.id,
    scans.c.endpoint_id,
    scans.c.queue,
    scans.c.name,
    scans.c.version,
    scans.c.kind,
    scans.c.verified,
    scans.c.worker,
    scans.c.leased_at,
    scans.c.attempt_count,
    scans.c.assignment_id,
    scans.c.wait_reason,
    scans.c.attempt_base,
)


@dataclass(frozen=True, slots=True)
class Lapsed:
    """A PENDING scan whose lease or wait ran out, as it was before we touched it."""

    row: Any

    @property
    def waiting(self) -> bool:
        return self.row.wait_reason is not None

    def ref(self, endpoint: str) -> ScanRef:
        r = self.row
        return ScanRef(
            r.id, r.endpoint_id, endpoint, r.queue, r.name, r.version, r.kind, bool(r.verified)
        )


def _lapsed(*, spent: bool, per_endpoint: bool, limit: str) -> Any:
    max_attempts = bindparam("b_max", type_=Integer)
    budget = (
        scans.c.attempt_count >= max_attempts if spent else scans.c.attempt_count < max_attempts
    )
    query = (
        select(*LAPSED_COLUMNS, literal(spent).label("spent"))
        .where(
            scans.c.status == Status.PENDING.value,
            scans.c.lease_expires_at < bindparam("b_now", type_=BigInteger),
            budget,
        )
        .order_by(scans.c.lease_expires_at)
        .limit(bindparam(limit, type_=Integer))
        .with_for_update(skip_locked=True)
    )
    if per_endpoint:
        query = query.where(scans.c.endpoint_id == bindparam("b_endpoint", type_=BigInteger))
    return query


# Built once: SQLAlchemy memoises a statement's cache key on the object, so a prebuilt
# statement skips both construction and cache-key generation on every job poll.
_POLL_LAPSED = union_all(
    select(_lapsed(spent=True, per_endpoint=True, limit="b_spent_limit").cte("spent")),
    select(_lapsed(spent=False, per_endpoint=True, limit="b_reclaim_limit").cte("reclaim")),
)
_SWEEP_LAPSED = _lapsed(spent=True, per_endpoint=False, limit="b_spent_limit")


def lapsed_pending(
    conn: Connection,
    *,
    endpoint_id: int | None,
    now: int,
    max_attempts: int,
    spent_limit: int,
    reclaim_limit: int,
) -> tuple[list[Lapsed], list[Lapsed]]:
    """Claim lapsed PENDING scans, oldest lapse first: (budget spent, budget left).

    Both kinds are filtered in SQL, so a crowd of one kind can never hide the other. Without
    an endpoint (the sweeper) only spent scans are claimed."""
    params = {"b_now": now, "b_max": max_attempts, "b_spent_limit": spent_limit}
    if endpoint_id is None:
        rows = conn.execute(_SWEEP_LAPSED, params).all()
    else:
        params |= {"b_endpoint": endpoint_id, "b_reclaim_limit": max(reclaim_limit, 0)}
        rows = conn.execute(_POLL_LAPSED, params).all()
    found = [Lapsed(row) for row in rows]
    return [x for x in found if x.row.spent], [x for x in found if not x.row.spent]


def lapse_events(lapsed: Sequence[Lapsed], endpoint: str) -> list[AttemptFailed]:
    """Reclaimed assignments are attempt failures: the scan goes round again."""
    return [
        AttemptFailed(
            x.ref(endpoint),
            x.row.attempt_count,
            lapse_outcome(waiting=x.waiting).value,
        )
        for x in lapsed
    ]


def close_lapsed_attempts(conn: Connection, lapsed: Sequence[Lapsed], *, now: int) -> None:
    """Write the attempt-history rows of lapsed assignments."""
    if not lapsed:
        return
    conn.execute(
        insert(attempts),
        [
            {
                "scan_id": item.row.id,
                "seq": item.row.attempt_base + item.row.attempt_count,
                "attempt": item.row.attempt_count,
                "assignment_id": item.row.assignment_id,
                "worker": item.row.worker,
                "leased_at": item.row.leased_at,
                "closed_at": now,
                "outcome": lapse_outcome(waiting=item.waiting).value,
                "summary": item.row.wait_reason,
                "artifact": None,
            }
            for item in lapsed
        ],
    )


_dead_letter = (
    update(scans)
    .where(scans.c.id == bindparam("b_id"), scans.c.status == Status.PENDING.value)
    .values(
        status=Status.FAILED.value,
        dead_lettered_at=bindparam("b_now"),
        finished_at=bindparam("b_now"),
        updated_at=bindparam("b_now"),
        fail_reason=bindparam("b_reason"),
        lease_expires_at=None,
    )
)


def dead_letter_lapsed(
    conn: Connection, lapsed: Sequence[Lapsed], *, now: int, endpoint_names: dict[int, str]
) -> list[ScanDeadLettered]:
    """Move lapsed, budget-spent scans to FAILED as dead letters; return their events."""
    if not lapsed:
        return []
    close_lapsed_attempts(conn, lapsed, now=now)
    reasons = [lapse_dead_letter_reason(waiting=item.waiting) for item in lapsed]
    conn.execute(
        _dead_letter,
        [
            {"b_id": item.row.id, "b_now": now, "b_reason": reason.value}
            for item, reason in zip(lapsed, reasons, strict=True)
        ],
    )
    return [
        _dead_letter_event(item, reason, now, endpoint_names)
        for item, reason in zip(lapsed, reasons, strict=True)
    ]


def _dead_letter_event(
    item: Lapsed, reason: Any, now: int, endpoint_names: dict[int, str]
) -> ScanDeadLettered:
    row = item.row
    ref = item.ref(endpoint_names[row.endpoint_id])
    final = FinalAttempt(
        seq=row.attempt_base + row.attempt_count,
        outcome=lapse_outcome(waiting=item.waiting).value,
        summary=row.wait_reason,
        artifact=None,
        at=now,
    )
    return ScanDeadLettered(ref, reason, row.attempt_count, row.worker, row.leased_at, now, final)


def endpoint_names_for(conn: Connection, lapsed: Sequence[Lapsed]) -> dict[int, str]:
    ids = {item.row.endpoint_id for item in lapsed}
    if not ids:
        return {}
    rows = conn.execute(select(endpoints.c.id, endpoints.c.name).where(endpoints.c.id.in_(ids)))
    return {row.id: row.name for row in rows}


# One random prefix per poll plus the scan id: distinct per assignment, unguessable.
_ASSIGN_VALUES: dict[str, Any] = {
    "status": Status.PENDING.value,
    "attempt_count": scans.c.attempt_count + 1,
    "assignment_id": bindparam("b_prefix", type_=String) + cast(scans.c.id, String),
    "worker": bindparam("b_worker", type_=String),
    "leased_at": bindparam("b_leased", type_=BigInteger),
    "lease_expires_at": bindparam("b_expires", type_=BigInteger),
    "wait_reason": None,
    "updated_at": bindparam("b_leased", type_=BigInteger),
}
_ASSIGN_RECLAIMED = (
    update(scans)
    .where(scans.c.id.in_(bindparam("b_ids", expanding=True)))
    .values(**_ASSIGN_VALUES)
    .returning(*JOB_COLUMNS)
)
# Oldest submission first, in ix_scans_queued's order. Ordered by id, PostgreSQL may walk the
# primary key through the finished history looking for the first QUEUED row.
_OLDEST_QUEUED = (
    select(scans.c.id)
    .where(
        scans.c.endpoint_id == bindparam("b_endpoint", type_=BigInteger),
        scans.c.status == Status.QUEUED.value,
    )
    .order_by(scans.c.created_at, scans.c.id)
    .limit(bindparam("b_limit", type_=Integer))
    .with_for_update(skip_locked=True)
)
_ASSIGN_QUEUED = (
    update(scans)
    .where(scans.c.id.in_(_OLDEST_QUEUED.scalar_subquery()))
    .values(**_ASSIGN_VALUES)
    .returning(*JOB_COLUMNS)
)


def _assign_params(*, worker: str, now: int, expires: int) -> dict[str, Any]:
    return {
        "b_prefix": secrets.token_hex(8) + "-",
        "b_worker": worker,
        "b_leased": now,
        "b_expires": expires,
    }


def assign_reclaimed(
    conn: Connection, ids: Sequence[int], *, worker: str, now: int, expires: int
) -> list[Any]:
    """Give lapsed scans with budget left a new assignment."""
    if not ids:
        return []
    params = _assign_params(worker=worker, now=now, expires=expires) | {"b_ids": list(ids)}
    return list(conn.execute(_ASSIGN_RECLAIMED, params))


def assign_queued(
    conn: Connection, *, endpoint_id: int, limit: int, worker: str, now: int, expires: int
) -> list[Any]:
    """Lease the oldest QUEUED scans of the endpoint, walking only the partial queued index."""
    if limit <= 0:
        return []
    params = _assign_params(worker=worker, now=now, expires=expires)
    params |= {"b_endpoint": endpoint_id, "b_limit": limit}
    return list(conn.execute(_ASSIGN_QUEUED, params))
