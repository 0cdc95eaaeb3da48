"""Results keyed by package: a worker that names only (name, version), as the dragonfly worker
does, is answered for the scan of its endpoint that the key most plausibly means. The store
finds the candidates in one statement that also checks the token; `pick` chooses among them
(pure), and `Results.complete` then judges the result as it judges any other."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from mainframe.lifecycle.rules import Status
from mainframe.store.accounts.authentication import Presented
from mainframe.store.engine.database import Database, NotFound, Unauthorized, first, record
from mainframe.store.engine.statements import statement

PACKAGE_SCANS = statement("package_scans")
SOLE_HOLDER_LEASE = statement("sole_holder_lease")


class PackageScan(NamedTuple):
    """A row of PACKAGE_SCANS: one per candidate scan, or one with only the principal when
    the token's endpoint holds none."""

    principal: str  # the worker the token speaks for, the same on every row
    scan_id: int | None
    status: str | None
    worker: str | None
    assignment_id: str | None


@dataclass(frozen=True, slots=True)
class Candidate:
    """A scan a result keyed by package may be meant for."""

    scan_id: int
    status: Status
    worker: str | None
    assignment_id: str | None


def pick(
    candidates: Sequence[Candidate], *, worker: str, assignment_id: str | None
) -> Candidate | None:
    """The scan a result means: the one its echoed assignment names; else the lease this
    worker holds, then another's, then a live scan nobody holds, then the latest ended one
    (each refused later with the reason the result's own rules give)."""
    if assignment_id is not None:
        for found in candidates:
            if found.assignment_id == assignment_id:
                return found

    def rank(found: Candidate) -> tuple[int, int]:
        if found.status is Status.PENDING:
            return (0 if found.worker == worker else 1), found.scan_id
        if found.status in (Status.QUEUED, Status.QUARANTINED):
            return 2, found.scan_id
        return 3, -found.scan_id

    return min(candidates, key=rank, default=None)


@dataclass(frozen=True, slots=True)
class Resolved:
    """The scan a result keyed by package means, and the worker that sent it."""

    scan_id: int
    worker: str


@dataclass(frozen=True, slots=True)
class Lease:
    """A scan's current attempt, as a result that echoes nothing is taken to mean it."""

    attempt: int
    assignment_id: str


class Packages:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def sole_holder_lease(self, found: Resolved) -> Lease | None:
        """The scan's current attempt when `found.worker` holds its lease and held no earlier
        attempt of it, so a result that echoes nothing can only be of this attempt; else None
        (docs/dragonfly.md, "Retries an unmodified worker can report")."""
        params = {"scan": found.scan_id, "worker": found.worker}
        async with self.db.lookup() as tx:
            row = await first(tx, SOLE_HOLDER_LEASE, params)
        return None if row is None else Lease(row["attempt_count"], row["assignment_id"])

    async def resolve(
        self, caller: Presented, *, name: str, version: str, assignment_id: str | None
    ) -> Resolved:
        """The scan of this worker's endpoint that a result for (name, version) means;
        Unauthorized for a token that is not a live worker's, NotFound for no scan."""
        params = {"digest": caller.digest, "name": name, "version": version}
        async with self.db.lookup() as tx:
            rows = await tx.rows(PACKAGE_SCANS, params)
        if not rows:
            raise Unauthorized("unknown token, or its endpoint is revoked")
        found_rows = [record(PackageScan, row) for row in rows]
        candidates = [
            Candidate(r.scan_id, Status(r.status), r.worker, r.assignment_id)
            for r in found_rows
            if r.scan_id is not None and r.status is not None  # NULL together: no scan
        ]
        found = pick(candidates, worker=found_rows[0].principal, assignment_id=assignment_id)
        if found is None:
            raise NotFound(f"no scan of {name}@{version} on this endpoint")
        return Resolved(found.scan_id, found_rows[0].principal)
