"""Intake: new scans one at a time or in batches, resubmissions of a live key, and quarantine
release. A source's submission is one statement that checks its token and inserts against
the partial unique index over live keys (ON CONFLICT DO NOTHING); only a resubmission, an
owner's or an anonymous submission reads more. A source's accepted submission is noted, after
commit, for its last-submission time (store/accounts/submissions.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from mainframe.lifecycle.rules import Status
from mainframe.lifecycle.scans import ScanReady, ScanRecord, scan_from_row
from mainframe.store.accounts import authentication, owners
from mainframe.store.accounts.authentication import EndpointNames, Presented, Principal
from mainframe.store.accounts.owners import EndpointRecord
from mainframe.store.accounts.submissions import LastSubmissions
from mainframe.store.engine.database import (
    Conflict,
    Database,
    Invalid,
    NotFound,
    Row,
    Sql,
    StoreError,
    Tx,
    Unauthorized,
    first,
    transact,
)
from mainframe.store.engine.statements import statement
from mainframe.store.work import queries
from mainframe.store.work.coalesce import Coalescer, by_runs
from mainframe.turns import in_turns

SUBMIT_AS_SOURCE = statement("submit_as_source")
SUBMIT_MANY_AS_SOURCE = statement("submit_many_as_source")
INSERT_SCANS = statement("insert_scans")
LIVE_SCAN = statement("live_scan")
PROMOTE = statement("promote_from_quarantine")
SPEC_OVERHEAD = 100  # a spec's queue, kind and JSON punctuation, generously
# A live key can turn terminal between a refused insert and the read; retry that many times.
RACE_RETRIES = 3

Caller = Presented | Principal


@dataclass(frozen=True, slots=True)
class ScanSpec:
    """One scan to submit, as the sender wrote it (payload already serialised JSON)."""

    name: str
    version: str
    queue: str = "default"
    kind: str = "scan"
    payload: str | None = None

    def key(self) -> tuple[str, str, str]:
        return self.name, self.version, self.kind

    def item(self) -> dict[str, str | None]:
        return {
            "queue": self.queue,
            "name": self.name,
            "version": self.version,
            "kind": self.kind,
            "payload": self.payload,
        }


@dataclass(frozen=True, slots=True)
class Submitted:
    """A batch item's outcome: the scan and whether it was created, or the refusal."""

    scan: ScanRecord | None
    created: bool
    error: StoreError | None = None


@dataclass(frozen=True, slots=True)
class Gate:
    """Who is submitting to which endpoint, decided once per request."""

    endpoint: EndpointRecord
    verified: bool
    quarantined: bool
    source: str | None

    @property
    def status(self) -> Status:
        return Status.QUARANTINED if self.quarantined else Status.QUEUED


class Intake:
    def __init__(self, db: Database, names: EndpointNames, submitted: LastSubmissions) -> None:
        self.db = db
        self.names = names
        self.submitted = submitted
        # A source's submissions that arrive while its last are at the database go together.
        self._as_source = Coalescer(self._submit_as_source)

    async def submit(
        self, caller: Caller | None, *, endpoint: str | None, spec: ScanSpec
    ) -> tuple[ScanRecord, bool]:
        """Submit as a source (verified), an owner (unverified) or anonymously (quarantined)."""
        if caller is not None and endpoint is None:
            # One statement, with whatever else the token sent meanwhile; when it inserts
            # nothing (not a source, or a live key) it changed nothing: the general path decides.
            created = await self._as_source(caller.digest, spec)
            if created is not None:
                self.submitted.note(caller.digest)  # only a source's token inserts here
                return created, True
        gate, done = await transact(
            self.db, lambda tx: self._gate_and_submit(tx, caller, endpoint, spec)
        )
        self._accepted(caller, gate)
        return done

    async def _gate_and_submit(
        self, tx: Tx, caller: Caller | None, endpoint: str | None, spec: ScanSpec
    ) -> tuple[Gate, tuple[ScanRecord, bool]]:
        gate = await _gate(tx, caller, endpoint)
        return gate, await self._submit_one(tx, gate, spec)

    async def submit_many(
        self, caller: Caller | None, *, endpoint: str | None, specs: Sequence[ScanSpec]
    ) -> list[Submitted]:
        """Submit a batch in one transaction under one authorization; items are independent:
        every new key in one statement, then each resubmission on its own."""
        gate, done = await transact(
            self.db, lambda tx: self._submit_all(tx, caller, endpoint, specs)
        )
        if any(item.scan is not None for item in done):
            self._accepted(caller, gate)
        return done

    async def _submit_all(
        self, tx: Tx, caller: Caller | None, endpoint: str | None, specs: Sequence[ScanSpec]
    ) -> tuple[Gate, list[Submitted]]:
        gate = await _gate(tx, caller, endpoint)
        params = {
            "endpoint": gate.endpoint.id,
            "status": gate.status.value,
            "verified": gate.verified,
            "source": gate.source,
            "items": orjson.dumps([spec.item() for spec in specs]).decode(),
        }
        created = await self._inserted(tx, INSERT_SCANS, params)
        done: list[Submitted] = []
        for spec in specs:
            fresh = created.pop(spec.key(), None)
            if fresh is not None:
                done.append(Submitted(fresh, True))
            else:
                done.append(Submitted(*await self._submit_one(tx, gate, spec)))
        return gate, done

    async def _submit_as_source(
        self, digest: str, specs: list[ScanSpec]
    ) -> list[ScanRecord | Exception | None]:
        """Submissions under one token that met, each statement no larger than a bulk request:
        each one's new scan, None where it inserted nothing, or the refusal of its value."""
        return await by_runs(
            specs,
            _weight,
            lambda spec: self._submit_alone(digest, spec),
            lambda run: self._submit_together(digest, run),
        )

    async def _submit_alone(self, digest: str, spec: ScanSpec) -> ScanRecord | Exception | None:
        """One statement, with no BEGIN or COMMIT round trips."""
        try:
            async with self.db.single() as tx:
                row = await first(tx, SUBMIT_AS_SOURCE, spec.item() | {"digest": digest})
                return None if row is None else await self._created(tx, row)
        except Invalid as exc:
            return exc

    async def _submit_together(
        self, digest: str, specs: list[ScanSpec]
    ) -> list[ScanRecord | Exception | None]:
        try:
            async with self.db.single() as tx:
                items = orjson.dumps([spec.item() for spec in specs]).decode()
                params = {"digest": digest, "items": items}
                made = await self._inserted(tx, SUBMIT_MANY_AS_SOURCE, params)
                return [made.pop(spec.key(), None) for spec in specs]
        except Invalid:
            # A value the database refused is one sender's: each goes alone, so only it is.
            return [await self._submit_alone(digest, spec) for spec in specs]

    async def release(self, owner_id: int, scan_id: int) -> ScanRecord:
        """Let a quarantined scan into QUEUED; it stays unverified (never announced)."""

        async def promote(tx: Tx) -> ScanRecord:
            scan = await queries.owned_scan(tx, owner_id, scan_id)
            if scan.status is not Status.QUARANTINED:
                raise Conflict(
                    "not_quarantined", f"scan {scan_id} is {scan.status}, not QUARANTINED"
                )
            row = await first(tx, PROMOTE, {"scan": scan.id, "verified": False, "source": None})
            assert row is not None  # the write lock is ours: nobody moved it since the read
            return scan_from_row(row, scan.endpoint)

        return await transact(self.db, promote)

    def _accepted(self, caller: Caller | None, gate: Gate) -> None:
        """A committed submission that created a scan or found its live key: a source's
        counts toward its last submission (an owner's and an anonymous one do not)."""
        if caller is not None and gate.source is not None:
            self.submitted.note(caller.digest)

    async def _inserted(
        self, tx: Tx, sql: Sql, params: dict[str, Any]
    ) -> dict[tuple[str, str, str], ScanRecord]:
        """The scans a batch insert made, by key (a key sent twice made one)."""
        made: dict[tuple[str, str, str], ScanRecord] = {}
        async for row in in_turns(await tx.rows(sql, params)):
            scan = await self._created(tx, row)
            made[scan.name, scan.version, scan.kind] = scan
        return made

    async def _created(self, tx: Tx, row: Row) -> ScanRecord:
        scan = scan_from_row(row, await self.names.of(tx, row["endpoint_id"]))
        # A scan of a paused queue is parked (no available_at): it becomes claimable, and is
        # announced, when the queue is resumed (store/operator/queues.py).
        if scan.status is Status.QUEUED and scan.available_at is not None:
            tx.events.append(ScanReady(scan.ref(), 0, scan.created_at))
        return scan

    async def _submit_one(self, tx: Tx, gate: Gate, spec: ScanSpec) -> tuple[ScanRecord, bool]:
        params = {
            "endpoint": gate.endpoint.id,
            "status": gate.status.value,
            "verified": gate.verified,
            "source": gate.source,
            "items": orjson.dumps([spec.item()]).decode(),
        }
        live_key = {"endpoint": gate.endpoint.id, "name": spec.name, "version": spec.version}
        for _ in range(RACE_RETRIES):
            row = await first(tx, INSERT_SCANS, params)
            if row is not None:
                return await self._created(tx, row), True
            live = await first(tx, LIVE_SCAN, live_key | {"kind": spec.kind})
            if live is not None:
                existing = scan_from_row(live, gate.endpoint.name)
                return await self._resubmitted(tx, existing, gate), False
        raise Conflict("busy_key", "the scan's key kept changing state; submit it again")

    async def _resubmitted(self, tx: Tx, existing: ScanRecord, gate: Gate) -> ScanRecord:
        """A verified submission of a quarantined key promotes it; otherwise it is as it was."""
        if not (gate.verified and existing.status is Status.QUARANTINED):
            return existing
        params = {"scan": existing.id, "verified": True, "source": gate.source}
        row = await first(tx, PROMOTE, params)
        if row is None:
            return existing
        promoted = scan_from_row(row, existing.endpoint)
        if promoted.available_at is not None:  # else parked in a paused queue
            ready = ScanReady(promoted.ref(), promoted.attempt_count, promoted.updated_at)
            tx.events.append(ready)
        return promoted


def _weight(spec: ScanSpec) -> int:
    """A spec's text in a statement of submissions that met."""
    return len(spec.payload or "") + len(spec.name) + len(spec.version) + SPEC_OVERHEAD


async def _gate(tx: Tx, caller: Caller | None, name: str | None) -> Gate:
    principal = None if caller is None else await _principal(tx, caller)
    if principal is not None and principal.role == "source":
        assert principal.endpoint_id is not None and principal.endpoint is not None
        if name is not None and name != principal.endpoint:
            raise Invalid("body.endpoint", "a source submits only to its own endpoint")
        found = await owners.endpoint_by_id(tx, principal.endpoint_id)
        assert found is not None
        return Gate(found, verified=True, quarantined=False, source=principal.name)
    if name is None:
        raise Invalid("body.endpoint", "name the endpoint to submit to")
    found = await owners.endpoint_by_name(tx, name)
    if principal is None:
        if found is None or not found.open_intake or found.revoked_at is not None:
            raise Unauthorized("a token is required: this endpoint has no open intake")
        return Gate(found, verified=False, quarantined=True, source=None)
    if principal.role != "owner" or found is None or found.owner_id != principal.owner_id:
        raise NotFound(f"no endpoint named {name!r}")
    if found.revoked_at is not None:
        raise Conflict("endpoint_revoked", f"endpoint {name!r} is revoked")
    return Gate(found, verified=False, quarantined=False, source=None)


async def _principal(tx: Tx, caller: Caller) -> Principal:
    found = await authentication.authenticate(tx, caller.digest)
    if found is None:
        raise Unauthorized("unknown token, or its endpoint is revoked")
    if found.role == "worker":
        raise Unauthorized("workers cannot submit scans; use a source or owner token")
    return found
