"""The owner's fleet at a glance: per endpoint, scans by status, the oldest due scan, and the
health of its hooks. Live statuses are counted through their partial indexes and terminal
ones read from the outcome totals, so the cost follows the backlog, not the history."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Connection, func, select, text

from mainframe.store import totals
from mainframe.store.schema import endpoints, hooks, scans

STATUSES = ("queued", "pending", "finished", "failed", "dead")
# Each live status as its partial index's literal predicate, so the count walks that index.
_LIVE = {
    "queued": "status = 'QUEUED'",
    "pending": "status = 'PENDING'",
    "quarantined": "status = 'QUARANTINED'",
}


@dataclass(frozen=True, slots=True)
class HookHealth:
    hook_id: int
    url: str
    queue: str | None
    enabled: bool
    disabled_reason: str | None
    consecutive_failures: int
    last_delivery_at: int | None


@dataclass(frozen=True, slots=True)
class EndpointCard:
    id: int
    name: str
    open_intake: bool
    revoked_at: int | None
    created_at: int
    counts: dict[str, int]  # STATUSES plus "quarantined"
    oldest_queued_at: int | None  # when the longest-waiting due scan became due
    hooks: list[HookHealth] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Overview:
    taken_at: int
    endpoints: list[EndpointCard]
    totals: dict[str, int]


def _live_counts(conn: Connection, ids: list[int]) -> dict[tuple[int, str], int]:
    found: dict[tuple[int, str], int] = {}
    for status, predicate in _LIVE.items():
        rows = conn.execute(
            select(scans.c.endpoint_id, func.count())
            .where(scans.c.endpoint_id.in_(ids), text(predicate))
            .group_by(scans.c.endpoint_id)
        )
        for endpoint_id, n in rows:
            found[int(endpoint_id), status] = int(n)
    return found


def _oldest_due(conn: Connection, endpoint_id: int, now: int) -> int | None:
    # The head of ix_scans_queued (endpoint_id, available_at, id): one probe.
    return conn.scalar(
        select(scans.c.available_at)
        .where(scans.c.endpoint_id == endpoint_id, text(_LIVE["queued"]))
        .where(scans.c.available_at <= now)
        .order_by(scans.c.available_at, scans.c.id)
        .limit(1)
    )


def _hooks(conn: Connection, ids: list[int]) -> dict[int, list[HookHealth]]:
    found: dict[int, list[HookHealth]] = {}
    rows = conn.execute(select(hooks).where(hooks.c.endpoint_id.in_(ids)).order_by(hooks.c.id))
    for r in rows:
        found.setdefault(r.endpoint_id, []).append(
            HookHealth(
                r.id,
                r.url,
                r.queue,
                bool(r.enabled),
                r.disabled_reason,
                r.consecutive_failures,
                r.last_delivery_at,
            )
        )
    return found


def overview(conn: Connection, owner_id: int, *, now: int) -> Overview:
    rows = conn.execute(
        select(endpoints).where(endpoints.c.owner_id == owner_id).order_by(endpoints.c.name)
    ).all()
    ids = [int(r.id) for r in rows]
    live = _live_counts(conn, ids) if ids else {}
    ended = totals.of_endpoints(conn, ids)
    hooked = _hooks(conn, ids) if ids else {}
    cards = []
    for r in rows:
        counts = {
            "queued": live.get((r.id, "queued"), 0),
            "pending": live.get((r.id, "pending"), 0),
            "finished": ended[r.id]["finished"],
            "failed": ended[r.id]["failed"],
            "dead": ended[r.id]["dead_lettered"],
            "quarantined": live.get((r.id, "quarantined"), 0),
        }
        cards.append(
            EndpointCard(
                r.id,
                r.name,
                bool(r.open_intake),
                r.revoked_at,
                r.created_at,
                counts,
                _oldest_due(conn, r.id, now),
                hooked.get(r.id, []),
            )
        )
    overall = {key: sum(card.counts[key] for card in cards) for key in (*STATUSES, "quarantined")}
    return Overview(now, cards, overall)
