"""Plain records the store hands out, read from its rows (nothing outside the store sees a
SQL row), and the endpoint names they carry, read once per process: names never change once
an endpoint exists, so records and events can name their endpoint without a join in every
hot statement."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mainframe.lifecycle.rules import Status
from mainframe.lifecycle.scans import AttemptRecord, ScanRecord
from mainframe.store.database import Sql, Tx, value

ENDPOINT_NAME = Sql("endpoint_name", "SELECT name FROM endpoints WHERE id = :endpoint")


@dataclass(frozen=True, slots=True)
class Presented:
    """A token as a request presented it, not yet checked: its sha256 digest. The hot
    statements check it themselves, in the same round trip as their work."""

    digest: str


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a token speaks for: an owner, or a worker or source of one endpoint."""

    role: str  # owner | worker | source
    name: str
    owner_id: int | None
    endpoint_id: int | None
    endpoint: str | None
    digest: str = ""  # of the token it was read from, so store calls can check it again
    token_id: int | None = None  # the credential's id, as its owner lists and deletes it


@dataclass(frozen=True, slots=True)
class EndpointRecord:
    id: int
    name: str
    owner_id: int
    open_intake: bool
    revoked_at: int | None


@dataclass(frozen=True, slots=True)
class Job:
    """One assignment handed to a worker by a job poll."""

    scan_id: int
    name: str
    version: str
    kind: str
    queue: str
    payload: str | None
    attempt: int
    assignment_id: str
    lease_expires_at: int


# Every column of `scans`, in the order each statement that reads a whole scan lists them
# (written out in its text; tests/unit/test_store_sql.py holds them to this order).
SCAN_COLUMNS = (
    "id",
    "endpoint_id",
    "queue",
    "name",
    "version",
    "kind",
    "payload",
    "status",
    "verified",
    "source",
    "worker",
    "attempt_count",
    "assignment_id",
    "leased_at",
    "lease_expires_at",
    "wait_reason",
    "created_at",
    "updated_at",
    "finished_at",
    "dead_lettered_at",
    "fail_reason",
    "result",
    "attempt_base",
    "available_at",
    "redriven_at",
    "redrive_count",
)


SCAN_INDEX = {column: n for n, column in enumerate(SCAN_COLUMNS)}


def scan_value(row: Sequence[Any], column: str) -> Any:
    """One column of a row that lists a whole scan (SCAN_COLUMNS), by its name."""
    return row[SCAN_INDEX[column]]


def scan_from_row(row: Sequence[Any], endpoint: str) -> ScanRecord:
    """A ScanRecord from the first len(SCAN_COLUMNS) values of a row, in that order."""
    (
        id_, endpoint_id, queue, name, version, kind, payload, status, verified, source,
        worker, attempt_count, assignment_id, leased_at, lease_expires_at, wait_reason,
        created_at, updated_at, finished_at, dead_lettered_at, fail_reason, result,
        attempt_base, available_at, redriven_at, redrive_count,
    ) = row[: len(SCAN_COLUMNS)]  # fmt: skip
    return ScanRecord(
        id=id_,
        endpoint_id=endpoint_id,
        endpoint=endpoint,
        queue=queue,
        name=name,
        version=version,
        kind=kind,
        payload=payload,
        status=Status(status),
        verified=bool(verified),
        source=source,
        worker=worker,
        attempt_count=attempt_count,
        assignment_id=assignment_id,
        leased_at=leased_at,
        lease_expires_at=lease_expires_at,
        wait_reason=wait_reason,
        created_at=created_at,
        updated_at=updated_at,
        finished_at=finished_at,
        dead_lettered_at=dead_lettered_at,
        fail_reason=fail_reason,
        result=result,
        attempt_base=attempt_base,
        available_at=available_at,
        redriven_at=redriven_at,
        redrive_count=redrive_count or 0,
    )


def attempt_from_row(row: Sequence[Any]) -> AttemptRecord:
    """An AttemptRecord from a row of seq, attempt, worker, leased_at, closed_at, outcome,
    summary, artifact."""
    seq, attempt, worker, leased_at, closed_at, outcome, summary, artifact = row[:8]
    return AttemptRecord(seq, attempt, worker, leased_at, closed_at, outcome, summary, artifact)


class EndpointNames:
    """Endpoint names by id, kept for the life of the process."""

    def __init__(self) -> None:
        self._names: dict[int, str] = {}

    async def of(self, tx: Tx, endpoint_id: int) -> str:
        """The endpoint's name, read once per process."""
        name = self._names.get(endpoint_id)
        if name is None:
            name = str(await value(tx, ENDPOINT_NAME, {"endpoint": endpoint_id}))
            self._names[endpoint_id] = name
        return name
