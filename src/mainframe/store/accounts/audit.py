"""The operators' audit trail: who changed what, when and from where, read back newest first.

Every row is written by the store call that makes the change, in its transaction, so a
change without its row (or a row without its change) cannot be committed. The time is the
database's `mf_now()`, like every stamp; the origin is the shell the change came through,
passed down as a plain value. A redrive's row is written by its first chunk, and every
chunk that requeues keeps its count and the ids it names true."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from mainframe.contract.vocabulary import API as API
from mainframe.contract.vocabulary import BOARD as BOARD
from mainframe.contract.vocabulary import CLI as CLI
from mainframe.contract.vocabulary import ORIGINS as ORIGINS
from mainframe.contract.vocabulary import Action as Action
from mainframe.contract.vocabulary import Origin as Origin
from mainframe.contract.vocabulary import requeued_detail
from mainframe.store.engine.database import Database, Tx, value
from mainframe.store.engine.statements import statement

# The keyset of the first page: older than every row.
NEWEST = 2**63 - 1


INSERT_REDRIVE = statement("insert_redrive_audit")
INSERT_ENTRY = statement("insert_audit_entry")
SET_REQUEUED = statement("set_audit_requeued")
AUDIT_ENTRIES = statement("audit_entries")


@dataclass(frozen=True, slots=True)
class AuditEntry:
    id: int
    at: int
    action: str
    count: int | None
    scan_ids: list[int] | None
    filter: dict[str, Any] | None
    origin: str | None  # None for a redrive recorded before origins were
    endpoint: str | None
    detail: dict[str, Any] | None


def _json(found: object) -> str | None:
    return None if found is None else orjson.dumps(found).decode()


def _origin(origin: str) -> str:
    # The type says it already; a typo in an untyped caller must not reach the trail.
    if origin not in ORIGINS:
        raise ValueError(f"origin is one of {', '.join(ORIGINS)}, not {origin!r}")
    return origin


async def record(
    tx: Tx,
    owner_id: int,
    action: Action,
    *,
    origin: Origin,
    endpoint: str | None = None,
    count: int | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    """One audit row for a change made in `tx`, stamped by the database's clock."""
    params = {
        "owner": owner_id,
        "action": action.value,
        "count": count,
        "origin": _origin(origin),
        "endpoint": endpoint,
        "detail": _json(detail),
    }
    await tx.run(INSERT_ENTRY, params)


async def record_redrive(
    tx: Tx,
    owner_id: int,
    *,
    scan_ids: list[int] | None,
    filter_json: dict[str, Any] | None,
    origin: Origin,
) -> int:
    """A redrive's audit row with nothing requeued yet (by ids or by filter); returns its
    id."""
    params = {
        "owner": owner_id,
        "scan_ids": _json(scan_ids),
        "filter": _json(filter_json),
        "origin": _origin(origin),
        "detail": _json(requeued_detail([], 0)),
    }
    return int(await value(tx, INSERT_REDRIVE, params))


async def set_requeued(tx: Tx, audit_id: int, ids: list[int], requeued: int) -> None:
    """A redrive's row after a chunk: `requeued` in all so far, `ids` the first of them."""
    detail = _json(requeued_detail(ids, requeued))
    await tx.run(SET_REQUEUED, {"audit": audit_id, "count": requeued, "detail": detail})


def _loaded(text: str | None) -> Any:
    return None if text is None else orjson.loads(text)


async def entries(tx: Tx, owner_id: int, *, before_id: int | None, limit: int) -> list[AuditEntry]:
    """The owner's audit rows newest first, older than `before_id`."""
    params = {"owner": owner_id, "before": NEWEST if before_id is None else before_id}
    rows = await tx.rows(AUDIT_ENTRIES, params | {"limit": limit})
    return [
        AuditEntry(
            id=row["id"],
            at=row["at"],
            action=row["action"],
            count=row["count"],
            scan_ids=_loaded(row["scan_ids"]),
            filter=_loaded(row["filter"]),
            origin=row["origin"],
            endpoint=row["endpoint"],
            detail=_loaded(row["detail"]),
        )
        for row in rows
    ]


class AuditTrail:
    """The owner's audit trail read back: the rows the changing calls wrote in their own
    transactions."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def entries(
        self, owner_id: int, *, before_id: int | None, limit: int
    ) -> list[AuditEntry]:
        """The owner's audit trail newest first, older than the audit row `before_id`."""
        async with self.db.read() as tx:
            return await entries(tx, owner_id, before_id=before_id, limit=limit)
