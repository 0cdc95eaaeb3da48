"""The owner's fleet at a glance: per endpoint, scans by status (the QUEUED ones held by a
paused queue apart, as `paused`), the oldest scan a poll could lease, and the health of its
hooks. Live statuses are counted through their partial indexes, finished and failed scans
are the outcome totals less what retention pruned, and dead letters the counts kept per
endpoint and cause: each what exists now, as the listings count it, so the cost follows the
backlog and the endpoints, not the history."""

from __future__ import annotations

from dataclasses import dataclass, field

from mainframe.store.accounts import owners
from mainframe.store.engine.database import Tx, value
from mainframe.store.engine.statements import statement

STATUSES = ("queued", "paused", "pending", "finished", "failed", "dead")

LIVE_COUNTS = statement("live_counts")
ENDED_NOW = statement("ended_now")
DEAD_LETTERS_NOW = statement("dead_letters_now")
OLDEST_DUE_OF_ENDPOINT = statement("oldest_due_of_endpoint")
HOOK_HEALTH = statement("hook_health")
NOW = statement("now")


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
    oldest_queued_at: int | None  # when the longest-waiting scan a poll could lease became due
    hooks: list[HookHealth] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Overview:
    taken_at: int
    endpoints: list[EndpointCard]
    totals: dict[str, int]


async def _hooks(tx: Tx, owner_id: int) -> dict[int, list[HookHealth]]:
    found: dict[int, list[HookHealth]] = {}
    for row in await tx.rows(HOOK_HEALTH, {"owner": owner_id}):
        found.setdefault(row["endpoint_id"], []).append(
            HookHealth(
                row["id"],
                row["url"],
                row["queue"],
                bool(row["enabled"]),
                row["disabled_reason"],
                row["consecutive_failures"],
                row["last_delivery_at"],
            )
        )
    return found


async def overview(tx: Tx, owner_id: int) -> Overview:
    rows = await tx.rows(owners.OWNED_ENDPOINTS, {"owner": owner_id})
    live: dict[tuple[int, str], int] = {}
    parked: dict[int, int] = {}  # per endpoint, its QUEUED scans with no due time
    for row in await tx.rows(LIVE_COUNTS, {"owner": owner_id}):
        endpoint_id = int(row["endpoint_id"])
        live[endpoint_id, row["state"]] = int(row["n"])
        parked[endpoint_id] = parked.get(endpoint_id, 0) + int(row["parked"] or 0)
    ended = {
        (int(row["endpoint_id"]), row["outcome"]): int(row["n"] or 0)
        for row in await tx.rows(ENDED_NOW, {"owner": owner_id})
    }
    dead = {
        int(row["endpoint_id"]): int(row["dead_letters"] or 0)
        for row in await tx.rows(DEAD_LETTERS_NOW, {"owner": owner_id})
    }
    hooked = await _hooks(tx, owner_id)
    cards = []
    for e in rows:
        endpoint_id = int(e["id"])
        # QUEUED in a paused queue, or still parked (lifecycle.rules.queue_state): no poll
        # leases it, so it is not counted as queued.
        paused = parked.get(endpoint_id, 0) + live.get((endpoint_id, "unparked"), 0)
        counts = {
            "queued": live.get((endpoint_id, "queued"), 0) - paused,
            "paused": paused,
            "pending": live.get((endpoint_id, "pending"), 0),
            "finished": ended.get((endpoint_id, "finished"), 0),
            "failed": ended.get((endpoint_id, "failed"), 0),
            "dead": dead.get(endpoint_id, 0),
            "quarantined": live.get((endpoint_id, "quarantined"), 0),
        }
        oldest = await value(tx, OLDEST_DUE_OF_ENDPOINT, {"endpoint": endpoint_id})
        cards.append(
            EndpointCard(
                endpoint_id,
                e["name"],
                bool(e["open_intake"]),
                e["revoked_at"],
                e["created_at"],
                counts,
                oldest,
                hooked.get(endpoint_id, []),
            )
        )
    overall = {key: sum(card.counts[key] for card in cards) for key in (*STATUSES, "quarantined")}
    return Overview(int(await value(tx, NOW)), cards, overall)
