"""Pausing and resuming a queue of an endpoint: while paused, its scans are not leased (a poll
answers as if the queue were empty), intake goes on, live leases run out as they would, and
nothing is dead-lettered by the pause; resuming needs no redrive.

A pause names the queue in `paused_queues` (every poll's lease statement leaves its scans out from
then on) and *parks* its QUEUED scans in chunks: `available_at` NULL, the due time kept in
`paused_due_at`, so no poll's walk of `ix_scans_queued` steps over them however many there are. New
scans of a paused queue are parked as they arrive, and so are those a quarantine release or a
verified resubmission promotes (store/work/intake.py) and the dead letters a redrive puts back
(store/operator/redrive.py), however many. A resume removes the name and puts the due times back, so
the queue hands its scans out in the order it had. A scan that went back to QUEUED in the paused
queue from a lease (a retryable failure, a worker's or an operator's; a lapse) was never parked,
only left out, and is due as it was: no poll leases in a paused queue, so there are at most as many
as the leases out when the pause began, and parking them would cost the hot result path a look at
the paused queues."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, NamedTuple

from mainframe.contract.limits import MAX_ID
from mainframe.contract.names import name_problem
from mainframe.lifecycle.scans import QueuePaused, QueueResumed, ScanReady, ScanRef
from mainframe.store.accounts import audit
from mainframe.store.accounts.audit import Action, Origin
from mainframe.store.accounts.owners import endpoint_by_name
from mainframe.store.engine.database import (
    Conflict,
    Database,
    Invalid,
    NotFound,
    Row,
    Tx,
    first,
    transact,
)
from mainframe.store.engine.statements import statement

CHUNK = 1_000  # scans parked or unparked per transaction: milliseconds of write lock each

PAUSE = statement("pause_queue")
RESUME = statement("resume_queue")
PAUSED_OF_ENDPOINT = statement("paused_queues_of_endpoint")
ALL_PAUSED = statement("all_paused_queues")
PARK = statement("park_queue")
UNPARK = statement("unpark_queue")
ENDPOINT_OWNER = statement("endpoint_owner")
# Before every (available_at, id) keyset: no stamp or id is below -MAX_ID.
FIRST_KEYSET = (-MAX_ID, 0)


@dataclass(frozen=True, slots=True)
class PausedQueue:
    queue: str
    paused_at: int
    paused_by: str


@dataclass(frozen=True, slots=True)
class QueueChange:
    """What a pause or a resume did: whether it changed anything, and how many scans it
    parked (a pause) or made due again (a resume)."""

    endpoint: str
    queue: str
    paused: bool
    changed: bool
    scans: int


class Queues:
    """An owner pauses and resumes the queues of their endpoints."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def pause(
        self, owner_id: int, endpoint: str, queue: str, *, by: str, origin: Origin
    ) -> QueueChange:
        """Stop leasing the queue's scans; pausing a paused queue changes nothing."""

        async def pause(tx: Tx) -> tuple[int, bool]:
            endpoint_id = await _owned(tx, owner_id, endpoint)
            params = {"endpoint": endpoint_id, "queue": _named(queue), "by": by}
            changed = await first(tx, PAUSE, params) is not None
            if changed:
                await audit.record(
                    tx, owner_id, Action.QUEUE_PAUSED, origin=origin, endpoint=endpoint,
                    detail={"queue": queue},
                )  # fmt: skip
                tx.events.append(QueuePaused(endpoint, queue, by))
            return endpoint_id, changed

        endpoint_id, changed = await transact(self.db, pause)
        parked = await self._park(endpoint_id, queue)
        return QueueChange(endpoint, queue, True, changed, parked)

    async def resume(
        self, owner_id: int, endpoint: str, queue: str, *, by: str, origin: Origin
    ) -> QueueChange:
        """Lease the queue's scans again, in the order they had; resuming a queue that is
        not paused changes nothing."""

        async def resume(tx: Tx) -> tuple[int, bool]:
            endpoint_id = await _owned(tx, owner_id, endpoint)
            params = {"endpoint": endpoint_id, "queue": _named(queue)}
            changed = await first(tx, RESUME, params) is not None
            if changed:
                await audit.record(
                    tx, owner_id, Action.QUEUE_RESUMED, origin=origin, endpoint=endpoint,
                    detail={"queue": queue},
                )  # fmt: skip
                tx.events.append(QueueResumed(endpoint, queue, by))
            return endpoint_id, changed

        endpoint_id, changed = await transact(self.db, resume)
        due = await self._unpark(endpoint_id, endpoint, queue)
        return QueueChange(endpoint, queue, False, changed, due)

    async def owner_of(self, endpoint: str) -> tuple[int, str]:
        """The id and name of the endpoint's owner (NotFound for no such endpoint)."""
        async with self.db.read() as tx:
            found = await first(tx, ENDPOINT_OWNER, {"endpoint": endpoint})
        if found is None:
            raise NotFound(f"no endpoint named {endpoint!r}")
        return int(found["owner_id"]), str(found["name"])

    async def paused(self, owner_id: int, endpoint: str) -> list[PausedQueue]:
        """The owner's endpoint's paused queues, by name (NotFound for another's)."""
        async with self.db.read() as tx:
            found = await endpoint_by_name(tx, endpoint)
            if found is None or found.owner_id != owner_id:
                raise NotFound(f"no endpoint named {endpoint!r}")
            rows = await tx.rows(PAUSED_OF_ENDPOINT, {"endpoint": found.id})
        return [PausedQueue(row["queue"], int(row["paused_at"]), row["paused_by"]) for row in rows]

    async def all_paused(self) -> set[tuple[str, str]]:
        """Every paused (endpoint, queue): what `mainframe_queue_paused` reports."""
        async with self.db.read() as tx:
            return {(row["name"], row["queue"]) for row in await tx.rows(ALL_PAUSED)}

    async def _park(self, endpoint_id: int, queue: str) -> int:
        after, parked = FIRST_KEYSET, 0
        while True:
            params = {"endpoint": endpoint_id, "queue": queue, "limit": CHUNK}
            params |= {"after_at": after[0], "after_id": after[1]}
            rows = await transact(self.db, functools.partial(_parked, params))
            parked += len(rows)
            if len(rows) < CHUNK:
                return parked
            # The next chunk starts after the last keyset (available_at, id) parked.
            after = max((int(row["paused_due_at"]), int(row["id"])) for row in rows)

    async def _unpark(self, endpoint_id: int, endpoint: str, queue: str) -> int:
        after, due = 0, 0
        while True:
            params = {"endpoint": endpoint_id, "queue": queue, "limit": CHUNK, "after_id": after}
            unparked = await transact(self.db, functools.partial(_unparked, endpoint, params))
            due += len(unparked)
            if len(unparked) < CHUNK:
                return due
            after = max(int(row.id) for row in unparked)


def _named(queue: str) -> str:
    problem = name_problem(queue)
    if problem is not None:
        raise Invalid("queue", problem)
    return queue


async def _owned(tx: Tx, owner_id: int, endpoint: str) -> int:
    found = await endpoint_by_name(tx, endpoint)
    if found is None or found.owner_id != owner_id:
        raise NotFound(f"no endpoint named {endpoint!r}")
    if found.revoked_at is not None:
        raise Conflict("endpoint_revoked", f"endpoint {endpoint!r} is revoked")
    return found.id


class UnparkedRow(NamedTuple):
    """A row of UNPARK: a scan the resume made due again."""

    id: int
    endpoint_id: int
    queue: str
    name: str
    version: str
    kind: str
    verified: bool
    source: str | None
    created_at: int
    due_at: int

    @classmethod
    def of(cls, row: Row) -> UnparkedRow:
        """A scan from a row of UNPARK, by column name (its due time is `available_at`)."""
        fields = {name: row[name] for name in cls._fields if name != "due_at"}
        return cls(**fields, due_at=row["available_at"])


async def _parked(params: dict[str, Any], tx: Tx) -> list[Row]:
    """A chunk of the queue's due scans parked."""
    return await tx.rows(PARK, params)


async def _unparked(endpoint: str, params: dict[str, Any], tx: Tx) -> list[UnparkedRow]:
    """A chunk of the queue's parked scans made due again, each verified one announced."""
    unparked = [UnparkedRow.of(row) for row in await tx.rows(UNPARK, params)]
    tx.events.extend(_ready(row, endpoint) for row in unparked if row.verified)
    return unparked


def _ready(row: UnparkedRow, endpoint: str) -> ScanReady:
    """A verified scan the resume made claimable again, announced as ready."""
    ref = ScanRef(row.id, row.endpoint_id, endpoint, row.queue, row.name, row.version, row.kind,
                  bool(row.verified), row.source, row.created_at)  # fmt: skip
    return ScanReady(ref, 0, int(row.due_at))
