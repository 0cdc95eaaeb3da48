"""Dead letters by cause: the causes view an operator reads (a cause's pattern is written
when a failed attempt closes, closing.py::NAME_CAUSE), and the cause of each dead letter
listed or opened. The counts themselves are kept by triggers on `scans` (migration 0020),
so this module only reads them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from mainframe.lifecycle.causes import Cause
from mainframe.store.engine.database import Database, Row, Tx, value
from mainframe.store.engine.statements import statement
from mainframe.store.operator.overview import NOW

DEAD_LETTERS_OF_CAUSE = statement("dead_letters_of_cause")
CAUSES_PAGE = statement("causes_page")
CAUSE_FACETS = statement("cause_facets")
CAUSE_HOURS = statement("cause_hours")
CAUSE_PATTERN = statement("cause_pattern")
CAUSES_OF_SCANS = statement("causes_of_scans")
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
            keys = orjson.dumps([row["cause"] for row in rows]).decode()
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
        int(row["id"]): Cause(row["cause"], row["pattern"], int(row["grouping_version"]))
        for row in rows
    }


def _hour(us: int) -> int:
    return us - us % HOUR_US


def _summary(row: Row, facets: list[Row], hours: list[Row], since: int) -> CauseSummary:
    cause = row["cause"]
    found: dict[str, list[Facet]] = {"queue": [], "kind": [], "worker": []}
    for hit in facets:
        facet = hit["facet"]
        if hit["cause"] == cause and len(found.setdefault(facet, [])) < FACET_VALUES:
            found[facet].append(Facet(hit["endpoint"], hit["value"], int(hit["hits"])))
    bars = [0] * SPARK_HOURS
    for hour in hours:
        index = (int(hour["hour_us"]) - since) // HOUR_US
        if hour["cause"] == cause and 0 <= index < SPARK_HOURS:
            bars[index] += int(hour["dead_letters"])
    return CauseSummary(
        cause,
        row["pattern"],
        int(row["dead_letters"]),
        int(row["first_seen_at"]),
        int(row["last_seen_at"]),
        int(row["example_scan_id"]),
        found,
        bars,
    )
