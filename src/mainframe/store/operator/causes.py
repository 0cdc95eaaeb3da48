"""Dead letters by cause: the causes view an operator reads (a cause's pattern is written
when a failed attempt closes, closing.py::NAME_CAUSE), and the cause of each dead letter
listed or opened. The counts themselves are kept by triggers on `scans` (migration 0020),
so this module only reads them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from mainframe.lifecycle.causes import Cause
from mainframe.store.engine.database import Database, Row, Sql, Tx, value
from mainframe.store.operator.overview import NOW

# A cause's dead letters now, over the owner's endpoints (or one), and of them those on
# endpoints not revoked (what a redrive of the cause requeues): the kept counts.
DEAD_LETTERS_OF_CAUSE = Sql(
    "dead_letters_of_cause",
    """
    SELECT COALESCE(SUM(dead_letter_causes.dead_letters), 0),
           COALESCE(SUM(CASE WHEN endpoints.revoked_at IS NULL
                             THEN dead_letter_causes.dead_letters ELSE 0 END), 0)
    FROM dead_letter_causes JOIN endpoints ON endpoints.id = dead_letter_causes.endpoint_id
    WHERE endpoints.owner_id = :owner AND dead_letter_causes.cause = :cause
      AND (:endpoint IS NULL OR endpoints.name = :endpoint)
    """,
    """
    SELECT COALESCE(SUM(dead_letter_causes.dead_letters), 0),
           COALESCE(SUM(CASE WHEN endpoints.revoked_at IS NULL
                             THEN dead_letter_causes.dead_letters ELSE 0 END), 0)
    FROM dead_letter_causes JOIN endpoints ON endpoints.id = dead_letter_causes.endpoint_id
    WHERE endpoints.owner_id = :owner AND dead_letter_causes.cause = :cause
      AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint)
    """,
)
# One page of causes with dead letters now, newest last seen first, strictly after the
# keyset (:after_seen, :after_cause): the owner's endpoints' rows of dead_letter_causes (one
# per endpoint and cause with dead letters, whatever the scans table holds), summed per cause.
CAUSES_PAGE = Sql(
    "causes_page",
    """
    SELECT counted.cause, causes.pattern, counted.dead_letters, counted.first_seen_at,
           counted.last_seen_at, counted.example_scan_id
    FROM (
        SELECT dead_letter_causes.cause, SUM(dead_letter_causes.dead_letters) AS dead_letters,
               MIN(dead_letter_causes.first_seen_at) AS first_seen_at,
               MAX(dead_letter_causes.last_seen_at) AS last_seen_at,
               MAX(dead_letter_causes.example_scan_id) AS example_scan_id
        FROM dead_letter_causes JOIN endpoints
            ON endpoints.id = dead_letter_causes.endpoint_id
        WHERE endpoints.owner_id = :owner AND (:endpoint IS NULL OR endpoints.name = :endpoint)
        GROUP BY dead_letter_causes.cause
    ) AS counted JOIN causes ON causes.cause = counted.cause
    WHERE (counted.last_seen_at, counted.cause) < (:after_seen, :after_cause)
    ORDER BY counted.last_seen_at DESC, counted.cause DESC
    LIMIT :limit
    """,
    """
    SELECT counted.cause, causes.pattern, counted.dead_letters, counted.first_seen_at,
           counted.last_seen_at, counted.example_scan_id
    FROM (
        SELECT dead_letter_causes.cause, SUM(dead_letter_causes.dead_letters) AS dead_letters,
               MIN(dead_letter_causes.first_seen_at) AS first_seen_at,
               MAX(dead_letter_causes.last_seen_at) AS last_seen_at,
               MAX(dead_letter_causes.example_scan_id) AS example_scan_id
        FROM dead_letter_causes JOIN endpoints
            ON endpoints.id = dead_letter_causes.endpoint_id
        WHERE endpoints.owner_id = :owner
          AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint)
        GROUP BY dead_letter_causes.cause
    ) AS counted JOIN causes ON causes.cause = counted.cause
    WHERE (counted.last_seen_at, counted.cause) < (:after_seen, :after_cause)
    ORDER BY counted.last_seen_at DESC, counted.cause DESC
    LIMIT :limit
    """,
)
# The queues, kinds and workers the page's causes hit (a JSON list of keys), each on its
# endpoint (two endpoints' `default` queues are two facets), most hits first.
CAUSE_FACETS = Sql(
    "cause_facets",
    """
    SELECT cause_facets.cause, cause_facets.facet, endpoints.name, cause_facets.value,
           cause_facets.hits
    FROM cause_facets JOIN endpoints ON endpoints.id = cause_facets.endpoint_id
    WHERE endpoints.owner_id = :owner AND (:endpoint IS NULL OR endpoints.name = :endpoint)
      AND cause_facets.cause IN (SELECT value FROM json_each(:causes))
    ORDER BY cause_facets.hits DESC, endpoints.name, cause_facets.value
    """,
    """
    SELECT cause_facets.cause, cause_facets.facet, endpoints.name, cause_facets.value,
           cause_facets.hits
    FROM cause_facets JOIN endpoints ON endpoints.id = cause_facets.endpoint_id
    WHERE endpoints.owner_id = :owner
      AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint)
      AND cause_facets.cause IN (SELECT jsonb_array_elements_text(CAST(:causes AS jsonb)))
    ORDER BY cause_facets.hits DESC, endpoints.name, cause_facets.value
    """,
)
# The page's causes' dead letters per hour since :since (the sparklines).
CAUSE_HOURS = Sql(
    "cause_hours",
    """
    SELECT cause_hours.cause, cause_hours.hour_us, SUM(cause_hours.dead_letters)
    FROM cause_hours JOIN endpoints ON endpoints.id = cause_hours.endpoint_id
    WHERE endpoints.owner_id = :owner AND (:endpoint IS NULL OR endpoints.name = :endpoint)
      AND cause_hours.cause IN (SELECT value FROM json_each(:causes))
      AND cause_hours.hour_us >= :since
    GROUP BY cause_hours.cause, cause_hours.hour_us
    """,
    """
    SELECT cause_hours.cause, cause_hours.hour_us, SUM(cause_hours.dead_letters)
    FROM cause_hours JOIN endpoints ON endpoints.id = cause_hours.endpoint_id
    WHERE endpoints.owner_id = :owner
      AND (CAST(:endpoint AS text) IS NULL OR endpoints.name = :endpoint)
      AND cause_hours.cause IN (SELECT jsonb_array_elements_text(CAST(:causes AS jsonb)))
      AND cause_hours.hour_us >= :since
    GROUP BY cause_hours.cause, cause_hours.hour_us
    """,
)
# A cause's pattern, by its key.
CAUSE_PATTERN = Sql("cause_pattern", "SELECT pattern FROM causes WHERE cause = :cause")
# The causes of the owner's dead letters among :ids (a JSON list), each found by key.
CAUSES_OF_SCANS = Sql(
    "causes_of_scans",
    """
    SELECT scans.id, causes.cause, causes.pattern, causes.grouping_version
    FROM scans
    JOIN endpoints ON endpoints.id = scans.endpoint_id
    JOIN causes ON causes.cause = scans.cause
    WHERE scans.id IN (SELECT value FROM json_each(:ids)) AND endpoints.owner_id = :owner
    """,
    """
    SELECT scans.id, causes.cause, causes.pattern, causes.grouping_version
    FROM scans
    JOIN endpoints ON endpoints.id = scans.endpoint_id
    JOIN causes ON causes.cause = scans.cause
    WHERE scans.id = ANY(ARRAY(
        SELECT CAST(value AS bigint) FROM jsonb_array_elements_text(CAST(:ids AS jsonb))
    )) AND endpoints.owner_id = :owner
    """,
)
# The newest keyset: every cause comes after it.
NEWEST = (2**63 - 1, "~")
HOUR_US = 3_600_000_000
SPARK_HOURS = 24  # the sparkline's span, one bar an hour
FACET_VALUES = 5  # the most-hit queues, kinds and workers shown per cause


@dataclass(frozen=True, slots=True)
class Facet:
    """A queue, kind or worker of one endpoint, and how many of a cause's dead letters are
    in it."""

    endpoint: str
    value: str
    dead_letters: int


@dataclass(frozen=True, slots=True)
class CauseSummary:
    """One cause as the causes view shows it."""

    cause: str
    pattern: str
    dead_letters: int
    first_seen_at: int  # the oldest of its dead letters now
    last_seen_at: int  # the newest
    example_scan_id: int  # one of them, the newest on its endpoint
    # facet (queue | kind | worker) -> its most-hit values with their dead letters
    facets: dict[str, list[Facet]]
    hours: list[int]  # dead letters per hour, the oldest of the last SPARK_HOURS first


@dataclass(frozen=True, slots=True)
class CausePage:
    items: list[CauseSummary]
    next_cursor: tuple[int, str] | None  # (last_seen_at, cause) of the last item


class Causes:
    """The owner's dead letters grouped by cause."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def pattern(self, cause: str) -> str | None:
        """The pattern a cause's key stands for (None for a key never seen)."""
        async with self.db.read() as tx:
            found = await value(tx, CAUSE_PATTERN, {"cause": cause})
        return None if found is None else str(found)

    async def of_scans(self, owner_id: int, scan_ids: Sequence[int]) -> dict[int, Cause]:
        """The cause of each of the owner's dead letters among `scan_ids`."""
        async with self.db.read() as tx:
            return await causes_of(tx, owner_id, scan_ids)

    async def page(
        self, owner_id: int, *, endpoint: str | None, after: tuple[int, str] | None, limit: int
    ) -> CausePage:
        """Causes with dead letters now, newest last seen first, after the keyset `after`."""
        after_seen, after_cause = after or NEWEST
        params = {"owner": owner_id, "endpoint": endpoint}
        async with self.db.read() as tx:
            rows = await tx.rows(
                CAUSES_PAGE,
                params | {"after_seen": after_seen, "after_cause": after_cause, "limit": limit},
            )
            keys = orjson.dumps([cause for cause, *_ in rows]).decode()
            facets = await tx.rows(CAUSE_FACETS, params | {"causes": keys}) if rows else []
            # The deployment's clock, as every stamp being compared was taken by it.
            since = _hour(int(await value(tx, NOW))) - (SPARK_HOURS - 1) * HOUR_US
            hours = (
                await tx.rows(CAUSE_HOURS, params | {"causes": keys, "since": since})
                if rows
                else []
            )
        items = [_summary(row, facets, hours, since) for row in rows]
        cursor = (items[-1].last_seen_at, items[-1].cause) if len(items) == limit else None
        return CausePage(items, cursor)


async def causes_of(tx: Tx, owner_id: int, scan_ids: Sequence[int]) -> dict[int, Cause]:
    """The cause of each of the owner's dead letters among `scan_ids`, in `tx`."""
    if not scan_ids:
        return {}
    ids = orjson.dumps(list(scan_ids)).decode()
    rows = await tx.rows(CAUSES_OF_SCANS, {"ids": ids, "owner": owner_id})
    return {
        int(scan_id): Cause(key, pattern, int(version)) for scan_id, key, pattern, version in rows
    }


def _hour(us: int) -> int:
    return us - us % HOUR_US


def _summary(row: Row, facets: list[Row], hours: list[Row], since: int) -> CauseSummary:
    cause, pattern, dead_letters, first_seen, last_seen, example = row
    found: dict[str, list[Facet]] = {"queue": [], "kind": [], "worker": []}
    for key, facet, endpoint, hit, hits in facets:
        if key == cause and len(found.setdefault(facet, [])) < FACET_VALUES:
            found[facet].append(Facet(endpoint, hit, int(hits)))
    bars = [0] * SPARK_HOURS
    for key, hour, count in hours:
        index = (int(hour) - since) // HOUR_US
        if key == cause and 0 <= index < SPARK_HOURS:
            bars[index] += int(count)
    return CauseSummary(
        cause,
        pattern,
        int(dead_letters),
        int(first_seen),
        int(last_seen),
        int(example),
        found,
        bars,
    )
