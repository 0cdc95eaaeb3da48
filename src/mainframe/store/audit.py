"""The operators' audit trail: one row per redrive, written by its first chunk, its count kept
true by every chunk, and read back newest first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from mainframe.store.database import Tx, value
from mainframe.store.sql import Sql

# The keyset of the first page: older than every row.
NEWEST = 2**63 - 1

INSERT_REDRIVE = Sql(
    "insert_redrive_audit",
    """
    INSERT INTO audit (owner_id, at, action, count, scan_ids, filter)
    VALUES (:owner, mf_now(), 'redrive', 0, :scan_ids, :filter)
    RETURNING id
    """,
)
ADD_TO_COUNT = Sql("add_to_audit_count", "UPDATE audit SET count = count + :n WHERE id = :audit")
# A walk of ix_audit_owner (owner_id, id) backwards from the keyset :before.
AUDIT_ENTRIES = Sql(
    "audit_entries",
    """
    SELECT id, at, action, count, scan_ids, filter FROM audit
    WHERE owner_id = :owner AND id < :before
    ORDER BY id DESC LIMIT :limit
    """,
)


@dataclass(frozen=True, slots=True)
class AuditEntry:
    id: int
    at: int
    action: str
    count: int
    scan_ids: list[int] | None
    filter: dict[str, Any] | None


async def record_redrive(
    tx: Tx, owner_id: int, *, scan_ids: list[int] | None, filter_json: dict[str, Any] | None
) -> int:
    """A redrive's audit row with a count of 0 (by ids or by filter); returns its id."""
    params = {
        "owner": owner_id,
        "scan_ids": None if scan_ids is None else orjson.dumps(scan_ids).decode(),
        "filter": None if filter_json is None else orjson.dumps(filter_json).decode(),
    }
    return int(await value(tx, INSERT_REDRIVE, params))


async def add_to_count(tx: Tx, audit_id: int, n: int) -> None:
    await tx.run(ADD_TO_COUNT, {"audit": audit_id, "n": n})


async def entries(tx: Tx, owner_id: int, *, before_id: int | None, limit: int) -> list[AuditEntry]:
    """The owner's audit rows newest first, older than `before_id`."""
    params = {"owner": owner_id, "before": NEWEST if before_id is None else before_id}
    return [
        AuditEntry(
            row[0],
            row[1],
            row[2],
            row[3],
            None if row[4] is None else orjson.loads(row[4]),
            None if row[5] is None else orjson.loads(row[5]),
        )
        for row in await tx.rows(AUDIT_ENTRIES, params | {"limit": limit})
    ]
