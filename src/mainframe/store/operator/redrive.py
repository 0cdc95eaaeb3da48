"""Redrive: an operator puts dead letters back in the queue with a fresh attempt budget.

A scan goes back to QUEUED, due now (or parked, as intake parks it, when its queue is
paused: store/operator/queues.py), its attempt count restarting from zero over a raised
`attempt_base` (attempt history seq keeps rising, every closed attempt is kept), its dead
letter cleared and its redrive noted. Work runs in chunks of CHUNK scans, one transaction
each, so a redrive of tens of thousands never holds the write lock for long; the audit row
is written by the first chunk, and every chunk that requeues keeps its count and the first
ids it requeued (contract/vocabulary.py::requeued_detail) true."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import orjson

from mainframe.contract.vocabulary import REQUEUED_IDS_KEPT
from mainframe.lifecycle.scans import ScanReady, ScanRedriven, ScanRef, ScansRedriven, increments
from mainframe.store.accounts import audit
from mainframe.store.engine.database import Database, Row, Tx, record, transact
from mainframe.store.engine.statements import statement

CHUNK = 500  # scans per transaction: a few milliseconds of write lock each
NOT_DEAD_LETTERED = "not_dead_lettered"
NOT_FOUND = "not_found"  # unknown, or another owner's: existence is not revealed
ENDPOINT_REVOKED = "endpoint_revoked"
# Requeuing it would give its key a second live scan (the same package was resubmitted).
LIVE_DUPLICATE = "live_duplicate"

Progress = Callable[[int, int], None]  # (done so far, total)

BUMP = statement("bump_totals")
CANDIDATES = statement("redrive_candidates")
LIVE_KEYS = statement("redrive_live_keys")
REQUEUE = statement("redrive_requeue")


@dataclass(frozen=True, slots=True)
class Skipped:
    scan_id: int
    reason: str


@dataclass(slots=True)
class Redriven:
    redriven: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    audit_id: int | None = None
    requeued_ids: list[int] = field(default_factory=list)  # the first REQUEUED_IDS_KEPT


def _ids(ids: Sequence[int]) -> str:
    return orjson.dumps(list(ids)).decode()


async def redrive(
    db: Database,
    owner_id: int,
    ids: Sequence[int],
    *,
    by: str,
    origin: audit.Origin,
    filter_json: dict[str, Any] | None = None,
    progress: Progress | None = None,
) -> Redriven:
    """Redrive `ids` (deduplicated, in order) chunk by chunk; report what was skipped. The
    audit row names `origin`, the shell the operator used."""
    wanted = list(dict.fromkeys(ids))
    chunks = [wanted[i : i + CHUNK] for i in range(0, len(wanted), CHUNK)] or [[]]
    order = _Order(owner_id, wanted if by == "ids" else None, filter_json, origin, by)
    done = Redriven()
    for number, chunk in enumerate(chunks):
        last = number == len(chunks) - 1
        done = await transact(db, functools.partial(_step, order, done, chunk, last=last))
        if progress is not None:
            progress(min(len(wanted), (number + 1) * CHUNK), len(wanted))
    return done


@dataclass(frozen=True, slots=True)
class _Order:
    """What the operator asked for, as the audit row and the closing event name it."""

    owner_id: int
    scan_ids: list[int] | None
    filter_json: dict[str, Any] | None
    origin: audit.Origin
    by: str


async def _step(
    order: _Order, before: Redriven, chunk: list[int], tx: Tx, *, last: bool
) -> Redriven:
    """`before` with one chunk redriven, as a new value: a run a deadlock aborted and the
    store runs again starts from what the last chunk committed."""
    done = replace(before, skipped=list(before.skipped), requeued_ids=list(before.requeued_ids))
    if done.audit_id is None:
        done.audit_id = await audit.record_redrive(
            tx,
            order.owner_id,
            scan_ids=order.scan_ids,
            filter_json=order.filter_json,
            origin=order.origin,
        )
    await _redrive_chunk(tx, order.owner_id, chunk, done)
    if last:
        skipped = len(done.skipped)
        tx.events.append(
            ScansRedriven(order.owner_id, done.audit_id, done.redriven, skipped, order.by)
        )
    return done


async def _redrive_chunk(tx: Tx, owner_id: int, chunk: list[int], done: Redriven) -> None:
    """The chunk's requeues and skips added to `done`, its audit row's count kept true."""
    requeued = await _chunk(tx, owner_id, chunk, done.skipped)
    if requeued:
        assert done.audit_id is not None
        done.redriven += len(requeued)
        room = REQUEUED_IDS_KEPT - len(done.requeued_ids)
        done.requeued_ids.extend(requeued[: max(room, 0)])
        await audit.set_requeued(tx, done.audit_id, done.requeued_ids, done.redriven)


async def _chunk(tx: Tx, owner_id: int, chunk: list[int], skipped: list[Skipped]) -> list[int]:
    """Requeue what the chunk may requeue, add the rest to `skipped`; the ids requeued, in
    the chunk's order."""
    if not chunk:
        return []
    params = {"ids": _ids(chunk), "owner": owner_id}
    found = {row.id: row for row in map(Candidate.of, await tx.rows(CANDIDATES, params))}
    live = {row["id"] for row in await tx.rows(LIVE_KEYS, params)}
    ready = sort_out(chunk, found, live, skipped)
    if not ready:
        return []
    requeued = await tx.rows(REQUEUE, {"ids": _ids([ref.scan_id for ref in ready])})
    due = {row["id"]: row["available_at"] for row in requeued}
    events = [ScanRedriven(ref) for ref in ready]
    await tx.many(BUMP, increments(events, tx.spread))
    tx.events.extend(events)
    # Announced as claimable like any other ready scan, and only when its sender was verified;
    # a parked one (no due time) is announced when its queue is resumed (store/operator/queues.py).
    tx.events.extend(
        ScanReady(ref, 0, int(due[ref.scan_id]))
        for ref in ready
        if ref.verified and due[ref.scan_id] is not None
    )
    return [ref.scan_id for ref in ready]


class Candidate(NamedTuple):
    """A row of CANDIDATES: a scan asked to be redriven, with its endpoint."""

    id: int
    endpoint_id: int
    endpoint: str
    queue: str
    name: str
    version: str
    kind: str
    verified: bool
    source: str | None
    created_at: int
    revoked_at: int | None
    dead_lettered_at: int | None

    @classmethod
    def of(cls, row: Row) -> Candidate:
        """A candidate from a row of CANDIDATES, by column name."""
        return record(cls, row)

    def ref(self) -> ScanRef:
        return ScanRef(
            self.id, self.endpoint_id, self.endpoint, self.queue, self.name, self.version,
            self.kind, bool(self.verified), self.source, self.created_at,
        )  # fmt: skip


def sort_out(
    chunk: list[int], found: dict[int, Candidate], live: set[int], skipped: list[Skipped]
) -> list[ScanRef]:
    """The chunk's scans that may be requeued, in order; each other one is added to `skipped`
    with its reason. Of two dead letters of one key only the first is requeued: the live-key
    index admits one live scan per (endpoint, name, version, kind)."""
    keys: set[tuple[int, str, str, str]] = set()
    ready: list[ScanRef] = []
    for scan_id in chunk:
        row = found.get(scan_id)
        if row is None:
            skipped.append(Skipped(scan_id, NOT_FOUND))
        elif row.revoked_at is not None:
            skipped.append(Skipped(scan_id, ENDPOINT_REVOKED))
        elif row.dead_lettered_at is None:
            skipped.append(Skipped(scan_id, NOT_DEAD_LETTERED))
        elif scan_id in live or (row.endpoint_id, row.name, row.version, row.kind) in keys:
            skipped.append(Skipped(scan_id, LIVE_DUPLICATE))
        else:
            keys.add((row.endpoint_id, row.name, row.version, row.kind))
            ready.append(row.ref())
    return ready
