"""Intake: new scans one at a time or in batches, resubmissions of a live key, and quarantine
release. A submission is one INSERT ... ON CONFLICT DO NOTHING against the partial unique
index over live keys; only a resubmission reads the live row, through the same index."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mainframe.lifecycle.events import ScanReady
from mainframe.lifecycle.rules import Status
from mainframe.store import accounts, queries
from mainframe.store.errors import Conflict, Invalid, NotFound, StoreError, Unauthorized
from mainframe.store.records import (
    SCAN_SELECT,
    EndpointRecord,
    Principal,
    ScanRecord,
    scan_from_values,
)
from mainframe.store.sql import Sql
from mainframe.store.uow import Tx, UnitOfWork

# The predicate of ux_scans_live_key, spelled exactly as the index declares it.
LIVE_PREDICATE = "status IN ('QUARANTINED', 'QUEUED', 'PENDING')"

INSERT_SCAN = Sql(
    "insert_scan",
    "INSERT INTO scans (endpoint_id, queue, name, version, kind, payload, status, verified, "
    "source, created_at, updated_at, available_at, attempt_count, attempt_base) "
    "VALUES (:endpoint, :queue, :name, :version, :kind, :payload, :status, :verified, "
    ":source, :now, :now, :available, 0, 0) "
    f"ON CONFLICT (endpoint_id, name, version, kind) WHERE {LIVE_PREDICATE} DO NOTHING "
    f"RETURNING {SCAN_SELECT}",
)
LIVE_SCAN = Sql(
    "live_scan",
    f"SELECT {SCAN_SELECT} FROM scans WHERE endpoint_id = :endpoint AND name = :name "
    f"AND version = :version AND kind = :kind AND {LIVE_PREDICATE}",
)
PROMOTE = Sql(
    "promote_from_quarantine",
    "UPDATE scans SET status = 'QUEUED', updated_at = :now, available_at = :now, "
    "verified = :verified, source = COALESCE(:source, source) "
    f"WHERE id = :id AND status = 'QUARANTINED' RETURNING {SCAN_SELECT}",
)
# A live key can turn terminal between a refused insert and the read; retry that many times.
RACE_RETRIES = 3


@dataclass(frozen=True, slots=True)
class ScanSpec:
    """One scan to submit, as the sender wrote it (payload already serialised JSON)."""

    name: str
    version: str
    queue: str = "default"
    kind: str = "scan"
    payload: str | None = None


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


class Intake:
    def __init__(self, uow: UnitOfWork) -> None:
        self.uow = uow

    def submit(
        self, principal: Principal | None, *, endpoint: str | None, spec: ScanSpec
    ) -> tuple[ScanRecord, bool]:
        """Submit as a source (verified), an owner (unverified) or anonymously (quarantined)."""
        with self.uow.write() as tx:
            gate = _gate(tx, principal, endpoint)
            return _submit_one(tx, gate, spec, now=self.uow.now())

    def submit_many(
        self, principal: Principal | None, *, endpoint: str | None, specs: Sequence[ScanSpec]
    ) -> list[Submitted]:
        """Submit a batch in one transaction under one authorization; items are independent."""
        with self.uow.write() as tx:
            gate = _gate(tx, principal, endpoint)
            now = self.uow.now()
            return [Submitted(*_submit_one(tx, gate, spec, now=now)) for spec in specs]

    def release(self, owner_id: int, scan_id: int) -> ScanRecord:
        """Let a quarantined scan into QUEUED; it stays unverified (never announced)."""
        with self.uow.write() as tx:
            scan = queries.owned_scan(tx.conn, owner_id, scan_id)
            if scan.status is not Status.QUARANTINED:
                raise Conflict(
                    "not_quarantined", f"scan {scan_id} is {scan.status}, not QUARANTINED"
                )
            now = self.uow.now()
            row = tx.first(PROMOTE, {"id": scan.id, "now": now, "verified": False, "source": None})
            assert row is not None  # the write lock is ours: nobody moved it since the read
            return scan_from_values(row, scan.endpoint)


def _submit_one(tx: Tx, gate: Gate, spec: ScanSpec, *, now: int) -> tuple[ScanRecord, bool]:
    status = Status.QUARANTINED if gate.quarantined else Status.QUEUED
    params = {
        "endpoint": gate.endpoint.id,
        "queue": spec.queue,
        "name": spec.name,
        "version": spec.version,
        "kind": spec.kind,
        "payload": spec.payload,
        "status": status.value,
        "verified": gate.verified,
        "source": gate.source,
        "now": now,
        "available": now if status is Status.QUEUED else None,
    }
    for _ in range(RACE_RETRIES):
        row = tx.first(INSERT_SCAN, params)
        if row is not None:
            scan = scan_from_values(row, gate.endpoint.name)
            if status is Status.QUEUED:
                tx.events.append(ScanReady(scan.ref(), scan.attempt_count, now))
            return scan, True
        live = tx.first(LIVE_SCAN, params)
        if live is not None:
            return _resubmitted(tx, scan_from_values(live, gate.endpoint.name), gate, now=now)
    raise Conflict("busy_key", "the scan's key kept changing state; submit it again")


def _resubmitted(tx: Tx, existing: ScanRecord, gate: Gate, *, now: int) -> tuple[ScanRecord, bool]:
    if not (gate.verified and existing.status is Status.QUARANTINED):
        return existing, False
    row = tx.first(
        PROMOTE, {"id": existing.id, "now": now, "verified": True, "source": gate.source}
    )
    if row is None:
        return existing, False
    promoted = scan_from_values(row, existing.endpoint)
    tx.events.append(ScanReady(promoted.ref(), promoted.attempt_count, now))
    return promoted, False


def _gate(tx: Tx, principal: Principal | None, name: str | None) -> Gate:
    if principal is not None and principal.role == "source":
        assert principal.endpoint_id is not None
        found = accounts.endpoint_by_id_fast(tx, principal.endpoint_id)
        if found is None or found.revoked_at is not None:
            raise Unauthorized("this source's endpoint is revoked")
        if name is not None and name != found.name:
            raise Invalid("body.endpoint", "a source submits only to its own endpoint")
        return Gate(found, verified=True, quarantined=False, source=principal.name)
    if name is None:
        raise Invalid("body.endpoint", "name the endpoint to submit to")
    found = accounts.endpoint_by_name(tx.conn, name)
    if principal is None:
        if found is None or not found.open_intake or found.revoked_at is not None:
            raise Unauthorized("a token is required: this endpoint has no open intake")
        return Gate(found, verified=False, quarantined=True, source=None)
    if principal.role != "owner" or found is None or found.owner_id != principal.owner_id:
        raise NotFound(f"no endpoint named {name!r}")
    if found.revoked_at is not None:
        raise Conflict("endpoint_revoked", f"endpoint {name!r} is revoked")
    return Gate(found, verified=False, quarantined=False, source=None)
