"""The operators' audit trail: one row per redrive, read back newest first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Connection, select

from mainframe.store.schema import audit


@dataclass(frozen=True, slots=True)
class AuditEntry:
    id: int
    at: int
    action: str
    count: int
    scan_ids: list[int] | None
    filter: dict[str, Any] | None


def entries(
    conn: Connection, owner_id: int, *, before_id: int | None, limit: int
) -> list[AuditEntry]:
    """The owner's audit rows newest first, older than `before_id` (ix_audit_owner)."""
    query = select(audit).where(audit.c.owner_id == owner_id)
    if before_id is not None:
        query = query.where(audit.c.id < before_id)
    rows = conn.execute(query.order_by(audit.c.id.desc()).limit(limit))
    return [
        AuditEntry(
            row.id,
            row.at,
            row.action,
            row._mapping["count"],
            None if row.scan_ids is None else orjson.loads(row.scan_ids),
            None if row.filter is None else orjson.loads(row.filter),
        )
        for row in rows
    ]
