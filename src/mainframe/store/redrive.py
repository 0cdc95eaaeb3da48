"""Redrive: an operator puts dead letters back in the queue with a fresh attempt budget.

A scan goes back to QUEUED, due now, its attempt count restarting from zero over a raised
`attempt_base` (attempt history seq keeps rising, every closed attempt is kept), its dead
letter cleared and its redrive noted. Work runs in chunks of CHUNK scans, one transaction
each, so a redrive of tens of thousands never holds the write lock for long; the audit row
is written by the first chunk and its count kept true by every later one."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import orjson
from sqlalchemy import Connection, insert, select, text, update

from mainframe.lifecycle.events import ScanReady, ScanRedriven, ScanRef, ScansRedriven
from mainframe.lifecycle.rules import Status
from mainframe.store import totals
from mainframe.store.intake import LIVE_PREDICATE
from mainframe.store.schema import audit, endpoints, scans
from mainframe.store.uow import Tx, UnitOfWork

CHUNK = 500  # scans per transaction: a few milliseconds of write lock each
NOT_DEAD_LETTERED = "not_dead_lettered"
NOT_FOUND = "not_found"  # unknown, or another owner's: existence is not revealed
ENDPOINT_REVOKED = "endpoint_revoked"
# Requeuing it would give its key a second live scan (the same package was resubmitted).
LIVE_DUPLICATE = "live_duplicate"

Progress = Callable[[int, int], None]  # (done so far, total)


@dataclass(frozen=True, slots=True)
class Skipped:
    scan_id: int
    reason: str


@dataclass(slots=True)
class Redriven:
    redriven: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    audit_id: int | None = None


@dataclass(frozen=True, slots=True)
class _Candidate:
    ref: ScanRef
    key: tuple[int, str, str, str]


def redrive(
    uow: UnitOfWork,
    owner_id: int,
    ids: Sequence[int],
    *,
    by: str,
    filter_json: dict[str, object] | None = None,
    progress: Progress | None = None,
) -> Redriven:
    """Redrive `ids` (deduplicated, in order) chunk by chunk; report what was skipped."""
    wanted = list(dict.fromkeys(ids))
    chunks = [wanted[i : i + CHUNK] for i in range(0, len(wanted), CHUNK)] or [[]]
    done = Redriven()
    for number, chunk in enumerate(chunks):
        with uow.write() as tx:
            now = uow.now()
            if done.audit_id is None:
                done.audit_id = _audit_row(tx.conn, owner_id, now, by, wanted, filter_json)
            requeued = _chunk(tx, owner_id, chunk, now, done.skipped, rng=uow.rng)
            done.redriven += requeued
            if requeued:
                tx.conn.execute(
                    update(audit)
                    .where(audit.c.id == done.audit_id)
                    .values(count=audit.c.count + requeued)
                )
            if number == len(chunks) - 1:
                tx.events.append(
                    ScansRedriven(owner_id, done.audit_id, done.redriven, len(done.skipped), by)
                )
        if progress is not None:
            progress(min(len(wanted), (number + 1) * CHUNK), len(wanted))
    return done


def _audit_row(
    conn: Connection,
    owner_id: int,
    now: int,
    by: str,
    ids: list[int],
    filter_json: dict[str, object] | None,
) -> int:
    values = {
        "owner_id": owner_id,
        "at": now,
        "action": "redrive",
        "count": 0,
        "scan_ids": orjson.dumps(ids).decode() if by == "ids" else None,
        "filter": orjson.dumps(filter_json).decode() if filter_json is not None else None,
    }
    found = conn.execute(insert(audit).values(**values)).inserted_primary_key
    assert found is not None
    return int(found[0])


def _chunk(
    tx: Tx,
    owner_id: int,
    chunk: list[int],
    now: int,
    skipped: list[Skipped],
    *,
    rng: random.Random,
) -> int:
    if not chunk:
        return 0
    ready = _candidates(tx.conn, owner_id, chunk, skipped)
    if not ready:
        return 0
    tx.conn.execute(
        update(scans)
        .where(
            scans.c.id.in_([c.ref.scan_id for c in ready]), scans.c.dead_lettered_at.is_not(None)
        )
        .values(
            status=Status.QUEUED.value,
            available_at=now,
            attempt_base=scans.c.attempt_base + scans.c.attempt_count,
            attempt_count=0,
            assignment_id=None,
            lease_expires_at=None,
            wait_reason=None,
            dead_lettered_at=None,
            finished_at=None,
            fail_reason=None,
            result=None,
            updated_at=now,
            redriven_at=now,
            redrive_count=scans.c.redrive_count + 1,
        )
    )
    events = [ScanRedriven(c.ref) for c in ready]
    totals.record(tx, events, rng=rng)
    tx.events.extend(events)
    # Announced as claimable like any other ready scan, and only when its sender was verified.
    tx.events.extend(ScanReady(c.ref, 0, now) for c in ready if c.ref.verified)
    return len(ready)


def _candidates(
    conn: Connection, owner_id: int, chunk: list[int], skipped: list[Skipped]
) -> list[_Candidate]:
    """The chunk's scans that may be requeued; the others are added to `skipped`."""
    query = (
        select(
            scans.c.id,
            scans.c.endpoint_id,
            endpoints.c.name.label("endpoint"),
            endpoints.c.owner_id,
            endpoints.c.revoked_at,
            scans.c.queue,
            scans.c.name,
            scans.c.version,
            scans.c.kind,
            scans.c.verified,
            scans.c.source,
            scans.c.created_at,
            scans.c.dead_lettered_at,
        )
        .select_from(scans.join(endpoints, endpoints.c.id == scans.c.endpoint_id))
        .where(scans.c.id.in_(chunk))
        # Two redrives of one scan at once: the second waits, then sees it requeued.
        .with_for_update(of=scans)
    )
    rows = {row.id: row for row in conn.execute(query)}
    found: list[_Candidate] = []
    for scan_id in chunk:
        row = rows.get(scan_id)
        if row is None or row.owner_id != owner_id:
            skipped.append(Skipped(scan_id, NOT_FOUND))
        elif row.revoked_at is not None:
            skipped.append(Skipped(scan_id, ENDPOINT_REVOKED))
        elif row.dead_lettered_at is None:
            skipped.append(Skipped(scan_id, NOT_DEAD_LETTERED))
        else:
            ref = ScanRef(
                row.id,
                row.endpoint_id,
                row.endpoint,
                row.queue,
                row.name,
                row.version,
                row.kind,
                bool(row.verified),
                row.source,
                row.created_at,
            )
            found.append(_Candidate(ref, (row.endpoint_id, row.name, row.version, row.kind)))
    return _without_live_keys(conn, found, skipped)


def _without_live_keys(
    conn: Connection, found: list[_Candidate], skipped: list[Skipped]
) -> list[_Candidate]:
    """Drop candidates whose key already has a live scan, or an earlier candidate in the chunk:
    the live-key index admits one live scan per (endpoint, name, version, kind)."""
    if not found:
        return []
    query = select(scans.c.endpoint_id, scans.c.name, scans.c.version, scans.c.kind).where(
        scans.c.endpoint_id.in_({c.key[0] for c in found}),
        scans.c.name.in_({c.key[1] for c in found}),
        # The live-key index's own predicate, as a literal it can be proved from.
        text(LIVE_PREDICATE),
    )
    live = {tuple(row) for row in conn.execute(query)}
    kept: list[_Candidate] = []
    for candidate in found:
        if candidate.key in live:
            skipped.append(Skipped(candidate.ref.scan_id, LIVE_DUPLICATE))
        else:
            live.add(candidate.key)
            kept.append(candidate)
    return kept
