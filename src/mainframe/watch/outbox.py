"""The watcher's alert outbox, as the relay sees it: claim undelivered rows, record which
sinks accepted them, mark delivery, and claim firing alerts for their periodic re-send. The
relay serves every source: each row and each alert carries its source's name."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, Table, delete, func, or_, select, tuple_, update
from sqlalchemy.dialects import postgresql, sqlite

from mainframe.watch.ports import AlertMessage
from mainframe.watch.tables import watch_alerts, watch_outbox, watch_outbox_sinks

FIRING, RESOLVED = "firing", "resolved"
# Characters of a poll's detail kept in the log, so one odd response cannot bloat a row.
DETAIL_LIMIT = 500


@dataclass(frozen=True, slots=True)
class OutboxItem:
    id: int
    message: AlertMessage
    accepted: frozenset[str]  # sinks that already took it
    attempt_count: int
    created_at: int
    delivered_at: int | None


@dataclass(frozen=True, slots=True)
class Resend:
    """A firing alert claimed for its periodic re-send; `previous_us` restores the claim."""

    message: AlertMessage
    previous_us: int | None


class OutboxStore:
    engine: Engine

    def claim_outbox(self, *, now_us: int, claim_us: int, limit: int = 100) -> list[OutboxItem]:
        """Claim undelivered rows, oldest first, that no other relay holds a live claim on."""
        o = watch_outbox.c
        with self.engine.begin() as conn:
            ids = conn.scalars(
                select(o.id)
                .where(
                    o.delivered_at.is_(None),
                    or_(o.claim_expires_at.is_(None), o.claim_expires_at <= now_us),
                )
                .order_by(o.id)
                .limit(limit)
                .with_for_update(skip_locked=True)
            ).all()
            if not ids:
                return []
            conn.execute(
                update(watch_outbox).where(o.id.in_(ids)).values(claim_expires_at=now_us + claim_us)
            )
            return _outbox_items(conn, select(watch_outbox).where(o.id.in_(ids)))

    def outbox(self) -> list[OutboxItem]:
        """Every outbox row, oldest first."""
        with self.engine.begin() as conn:
            return _outbox_items(conn, select(watch_outbox))

    def accept(self, outbox_id: int, *, sink: str, now_us: int) -> None:
        """Record that `sink` took the row, so a retry after a partial failure skips it."""
        with self.engine.begin() as conn:
            row = {"outbox_id": outbox_id, "sink": sink, "delivered_at": now_us}
            insert_ignore(conn, watch_outbox_sinks, row, ("outbox_id", "sink"))

    def mark_delivered(self, outbox_id: int, *, now_us: int) -> None:
        o = watch_outbox.c
        with self.engine.begin() as conn:
            conn.execute(
                update(watch_outbox)
                .where(o.id == outbox_id)
                .values(
                    delivered_at=now_us,
                    attempt_count=o.attempt_count + 1,
                    claim_expires_at=None,
                    last_error=None,
                )
            )

    def mark_failed(self, outbox_id: int, *, error: str | None) -> None:
        """Keep the row for the next pass; `error` None means it was held back, not tried."""
        o = watch_outbox.c
        values: dict[str, Any] = {"claim_expires_at": None}
        if error is not None:
            values |= {"attempt_count": o.attempt_count + 1, "last_error": error[:DETAIL_LIMIT]}
        with self.engine.begin() as conn:
            conn.execute(update(watch_outbox).where(o.id == outbox_id).values(**values))

    def oldest_undelivered_us(self, source: str | None = None) -> int | None:
        with self.engine.begin() as conn:
            return oldest_undelivered(conn, source)

    def prune_delivered(self, *, before_us: int, limit: int) -> int:
        """Forget at most `limit` alerts delivered before `before_us`, oldest first, with the
        sinks that took them, in one transaction (never one still undelivered); how many."""
        o, s = watch_outbox.c, watch_outbox_sinks.c
        with self.engine.begin() as conn:
            ids = conn.scalars(
                select(o.id)
                .where(o.delivered_at.is_not(None), o.delivered_at < before_us)
                .order_by(o.delivered_at)
                .limit(limit)
            ).all()
            if not ids:
                return 0
            conn.execute(delete(watch_outbox_sinks).where(s.outbox_id.in_(ids)))
            pruned: int = conn.execute(delete(watch_outbox).where(o.id.in_(ids))).rowcount
            return pruned

    def claim_resends(self, *, now_us: int, interval_us: int) -> list[Resend]:
        """Claim firing alerts not sent for `interval_us` whose transition was delivered."""
        a, o = watch_alerts.c, watch_outbox.c
        undelivered = (
            select(o.id)
            .where(o.source == a.source, o.alert == a.alert, o.delivered_at.is_(None))
            .exists()
        )
        last_sent = func.coalesce(a.resent_at, a.changed_at)
        with self.engine.begin() as conn:
            rows = conn.execute(
                select(watch_alerts)
                .where(
                    a.firing.is_(True),
                    a.changed_at.is_not(None),
                    last_sent <= now_us - interval_us,
                    ~undelivered,
                )
                .order_by(a.source, a.alert)
                .with_for_update(skip_locked=True, of=watch_alerts)
            ).all()
            if rows:
                keys = [(r.source, r.alert) for r in rows]
                conn.execute(
                    update(watch_alerts)
                    .where(tuple_(a.source, a.alert).in_(keys))
                    .values(resent_at=now_us)
                )
        return [Resend(_message(r, firing=True), r.resent_at) for r in rows]

    def release_resend(
        self, source: str, alert: str, *, claimed_us: int, previous_us: int | None
    ) -> None:
        """Undo a resend claim whose delivery failed, so the next pass tries again."""
        a = watch_alerts.c
        with self.engine.begin() as conn:
            conn.execute(
                update(watch_alerts)
                .where(a.source == source, a.alert == alert, a.resent_at == claimed_us)
                .values(resent_at=previous_us)
            )


def _outbox_items(conn: Connection, query: Any) -> list[OutboxItem]:
    rows = conn.execute(query.order_by(watch_outbox.c.id)).all()
    s = watch_outbox_sinks.c
    accepted: dict[int, set[str]] = {}
    found = conn.execute(select(s.outbox_id, s.sink).where(s.outbox_id.in_([r.id for r in rows])))
    for outbox_id, sink in found:
        accepted.setdefault(outbox_id, set()).add(sink)
    return [
        OutboxItem(
            r.id,
            _message(r, firing=r.state == FIRING),
            frozenset(accepted.get(r.id, ())),
            r.attempt_count,
            r.created_at,
            r.delivered_at,
        )
        for r in rows
    ]


def _message(row: Any, *, firing: bool) -> AlertMessage:
    """An AlertMessage from an outbox row or an alert state row (same column names)."""
    return AlertMessage(
        alert=row.alert,
        policy_version=row.policy_version,
        firing=firing,
        window_key=row.window_key,
        starts_at_us=row.starts_at_us,
        ends_at_us=None if firing else row.ends_at_us,
        labels=json.loads(row.labels),
        annotations=json.loads(row.annotations),
        source=row.source,
    )


def oldest_undelivered(conn: Connection, source: str | None = None) -> int | None:
    """When the oldest alert not yet delivered was written: of `source`, or of any."""
    o = watch_outbox.c
    query = select(func.min(o.created_at)).where(o.delivered_at.is_(None))
    if source is not None:
        query = query.where(o.source == source)
    oldest = conn.scalar(query)
    return None if oldest is None else int(oldest)


def insert_ignore(
    conn: Connection, table: Table, values: Mapping[str, Any], keys: Sequence[str]
) -> bool:
    """INSERT unless a row with the same key exists; True when this call inserted it."""
    # RETURNING says whether a row went in: rowcount is -1 once a statement returns rows, as
    # PostgreSQL inserts with an autoincrement key implicitly do.
    key = table.primary_key.columns
    if conn.dialect.name == "postgresql":
        pg = postgresql.insert(table).values(**values).on_conflict_do_nothing(index_elements=keys)
        return conn.execute(pg.returning(*key)).first() is not None
    lite = sqlite.insert(table).values(**values).on_conflict_do_nothing(index_elements=keys)
    return conn.execute(lite.returning(*key)).first() is not None
