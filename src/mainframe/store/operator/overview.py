"""The owner's fleet at a glance: per endpoint, scans by status (the QUEUED ones held by a
paused queue apart, as `paused`), the oldest scan a poll could lease, and the health of its
hooks. Live statuses are counted through their partial indexes, finished and failed scans
are the outcome totals less what retention pruned, and dead letters the counts kept per
endpoint and cause: each what exists now, as the listings count it, so the cost follows the
backlog and the endpoints, not the history."""

from __future__ import annotations

from dataclasses import dataclass, field

from mainframe.store.accounts import owners
from mainframe.store.engine.database import Sql, Tx, value

STATUSES = ("queued", "paused", "pending", "finished", "failed", "dead")

# Each live status counted per endpoint with its partial index's literal predicate, the
# QUEUED ones with how many are parked (available_at NULL) in the same walk; then, per
# endpoint, its paused queues' unparked QUEUED scans (as fleet_snapshot.QUEUED_STATES counts
# them: the endpoint's unparked part of ix_scans_queued per paused queue). One statement, so
# the queued and paused depths it yields are of one moment.
LIVE_COUNTS = Sql(
    "live_counts",
    """
    SELECT scans.endpoint_id, 'queued', count(*),
           SUM(CASE WHEN scans.available_at IS NULL THEN 1 ELSE 0 END) FROM scans
    JOIN endpoints ON endpoints.id = scans.endpoint_id
    WHERE endpoints.owner_id = :owner AND scans.status = 'QUEUED' GROUP BY scans.endpoint_id
    UNION ALL
    SELECT scans.endpoint_id, 'pending', count(*), 0 FROM scans
    JOIN endpoints ON endpoints.id = scans.endpoint_id
    WHERE endpoints.owner_id = :owner AND scans.status = 'PENDING' GROUP BY scans.endpoint_id
    UNION ALL
    SELECT scans.endpoint_id, 'quarantined', count(*), 0 FROM scans
    JOIN endpoints ON endpoints.id = scans.endpoint_id
    WHERE endpoints.owner_id = :owner AND scans.status = 'QUARANTINED'
    GROUP BY scans.endpoint_id
    UNION ALL
    SELECT paused_queues.endpoint_id, 'unparked', count(*), 0
    FROM endpoints CROSS JOIN paused_queues CROSS JOIN scans
    WHERE endpoints.owner_id = :owner AND paused_queues.endpoint_id = endpoints.id
      AND scans.endpoint_id = paused_queues.endpoint_id AND scans.status = 'QUEUED'
      AND scans.available_at IS NOT NULL AND scans.queue = paused_queues.queue
    GROUP BY paused_queues.endpoint_id
    """,
    """
    SELECT scans.endpoint_id, 'queued', count(*),
           SUM(CASE WHEN scans.available_at IS NULL THEN 1 ELSE 0 END) FROM scans
    JOIN endpoints ON endpoints.id = scans.endpoint_id
    WHERE endpoints.owner_id = :owner AND scans.status = 'QUEUED' GROUP BY scans.endpoint_id
    UNION ALL
    SELECT scans.endpoint_id, 'pending', count(*), 0 FROM scans
    JOIN endpoints ON endpoints.id = scans.endpoint_id
    WHERE endpoints.owner_id = :owner AND scans.status = 'PENDING' GROUP BY scans.endpoint_id
    UNION ALL
    SELECT scans.endpoint_id, 'quarantined', count(*), 0 FROM scans
    JOIN endpoints ON endpoints.id = scans.endpoint_id
    WHERE endpoints.owner_id = :owner AND scans.status = 'QUARANTINED'
    GROUP BY scans.endpoint_id
    UNION ALL
    SELECT paused_queues.endpoint_id, 'unparked', SUM(held.unparked), 0
    FROM endpoints JOIN paused_queues ON paused_queues.endpoint_id = endpoints.id
    CROSS JOIN LATERAL (
        SELECT count(*) AS unparked FROM scans
        WHERE scans.endpoint_id = paused_queues.endpoint_id AND scans.status = 'QUEUED'
          AND scans.available_at IS NOT NULL AND scans.queue = paused_queues.queue
    ) AS held
    WHERE endpoints.owner_id = :owner
    GROUP BY paused_queues.endpoint_id
    """,
)
# Each endpoint's finished and plainly failed scans now: the outcome totals (every scan that
# ended so, for packages_scan_outcomes) less what retention pruned of them (pruned_scans,
# store/operator/retention.py). One statement, so both are read at one instant; a few dozen rows per
# endpoint through the two tables' primary keys.
ENDED_NOW = Sql(
    "ended_now",
    """
    SELECT ended.endpoint_id, ended.outcome, SUM(ended.n) FROM (
        SELECT scan_totals.endpoint_id, scan_totals.outcome, scan_totals.count AS n
        FROM scan_totals JOIN endpoints ON endpoints.id = scan_totals.endpoint_id
        WHERE endpoints.owner_id = :owner AND scan_totals.outcome IN ('finished', 'failed')
        UNION ALL
        SELECT pruned_scans.endpoint_id, pruned_scans.outcome, -pruned_scans.count
        FROM pruned_scans JOIN endpoints ON endpoints.id = pruned_scans.endpoint_id
        WHERE endpoints.owner_id = :owner AND pruned_scans.outcome IN ('finished', 'failed')
    ) AS ended
    GROUP BY ended.endpoint_id, ended.outcome
    """,
)
# Each endpoint's dead letters now: the counts kept per endpoint and cause (migration 0017),
# which a prune, a redrive and a second death move in their own transaction, as the listing's
# unfiltered count reads them (store/operator/dead_letters.py::DEAD_LETTER_TOTAL).
DEAD_LETTERS_NOW = Sql(
    "dead_letters_now",
    """
    SELECT dead_letter_causes.endpoint_id, SUM(dead_letter_causes.dead_letters)
    FROM dead_letter_causes JOIN endpoints ON endpoints.id = dead_letter_causes.endpoint_id
    WHERE endpoints.owner_id = :owner
    GROUP BY dead_letter_causes.endpoint_id
    """,
)
# The oldest scan of the endpoint a poll could lease: ix_scans_queued (endpoint_id,
# available_at, id) walked from its oldest due row, stepping over a paused queue's unparked
# ones (fleet_snapshot.OLDEST_DUE for one endpoint).
OLDEST_DUE_OF_ENDPOINT = Sql(
    "oldest_due_of_endpoint",
    """
    SELECT available_at FROM scans
    WHERE endpoint_id = :endpoint AND status = 'QUEUED' AND available_at <= mf_now()
      AND queue NOT IN (SELECT queue FROM paused_queues WHERE endpoint_id = :endpoint)
    ORDER BY available_at, id LIMIT 1
    """,
)
HOOK_HEALTH = Sql(
    "hook_health",
    """
    SELECT hooks.endpoint_id, hooks.id, hooks.url, hooks.queue, hooks.enabled,
           hooks.disabled_reason, hooks.consecutive_failures, hooks.last_delivery_at
    FROM hooks JOIN endpoints ON endpoints.id = hooks.endpoint_id
    WHERE endpoints.owner_id = :owner ORDER BY hooks.id
    """,
)
NOW = Sql("now", "SELECT mf_now()")


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
        endpoint_id, hook_id, url, queue, enabled, reason, failures, last_delivery_at = row
        found.setdefault(endpoint_id, []).append(
            HookHealth(hook_id, url, queue, bool(enabled), reason, failures, last_delivery_at)
        )
    return found


async def overview(tx: Tx, owner_id: int) -> Overview:
    rows = await tx.rows(owners.OWNED_ENDPOINTS, {"owner": owner_id})
    live: dict[tuple[int, str], int] = {}
    parked: dict[int, int] = {}  # per endpoint, its QUEUED scans with no due time
    for endpoint_id, state, n, unleasable in await tx.rows(LIVE_COUNTS, {"owner": owner_id}):
        live[endpoint_id, state] = int(n)
        parked[endpoint_id] = parked.get(endpoint_id, 0) + int(unleasable or 0)
    ended = {
        (int(endpoint_id), outcome): int(n or 0)
        for endpoint_id, outcome, n in await tx.rows(ENDED_NOW, {"owner": owner_id})
    }
    dead = {
        int(endpoint_id): int(n or 0)
        for endpoint_id, n in await tx.rows(DEAD_LETTERS_NOW, {"owner": owner_id})
    }
    hooked = await _hooks(tx, owner_id)
    cards = []
    for e in map(owners.EndpointRow._make, rows):
        # QUEUED in a paused queue, or still parked (lifecycle.rules.queue_state): no poll
        # leases it, so it is not counted as queued.
        paused = parked.get(e.id, 0) + live.get((e.id, "unparked"), 0)
        counts = {
            "queued": live.get((e.id, "queued"), 0) - paused,
            "paused": paused,
            "pending": live.get((e.id, "pending"), 0),
            "finished": ended.get((e.id, "finished"), 0),
            "failed": ended.get((e.id, "failed"), 0),
            "dead": dead.get(e.id, 0),
            "quarantined": live.get((e.id, "quarantined"), 0),
        }
        oldest = await value(tx, OLDEST_DUE_OF_ENDPOINT, {"endpoint": e.id})
        cards.append(
            EndpointCard(
                e.id,
                e.name,
                bool(e.open_intake),
                e.revoked_at,
                e.created_at,
                counts,
                oldest,
                hooked.get(e.id, []),
            )
        )
    overall = {key: sum(card.counts[key] for card in cards) for key in (*STATUSES, "quarantined")}
    return Overview(int(await value(tx, NOW)), cards, overall)
