"""The dragonfly deployment's reads and records: every call is one statement (or one
transaction) over the caller's endpoint, by id; the routes decide who that is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import orjson

from mainframe.store.engine.database import Database, Row, Sql, first, record, transact, value
from mainframe.store.engine.statements import statement

KNOWN_PACKAGES = statement("known_packages")
PACKAGES_OF_NAME = statement("packages_of_name")
COUNT_PACKAGES_OF_NAME = statement("count_packages_of_name")
PACKAGES_FINISHED_SINCE = statement("packages_finished_since")
COUNT_PACKAGES_FINISHED_SINCE = statement("count_packages_finished_since")
REPORTED_PACKAGES = statement("reported_packages")
COUNT_REPORTED_PACKAGES = statement("count_reported_packages")
REPORT_OF_NAME = statement("report_of_name")
INSERT_REPORT = statement("insert_report")
QUEUE_STATUS = statement("queue_status")
ALERTING_OF = statement("alerting_of")
SET_ALERTING = statement("set_alerting")
SUPPRESSIONS_OF_NAME = statement("suppressions_of_name")
INSERT_SUPPRESSION = statement("insert_suppression")
SUPPRESSION = statement("suppression")
UPDATE_SUPPRESSION = statement("update_suppression")
DELETE_SUPPRESSION = statement("delete_suppression")
DELETE_VERSION_SUPPRESSIONS = statement("delete_version_suppressions")


class PackageRow(NamedTuple):
    """A scan as the bot's lookups read it, with its package's report (if any)."""

    id: int
    name: str
    version: str
    status: str
    payload: str | None
    result: str | None
    created_at: int
    source: str | None
    leased_at: int | None
    worker: str | None
    attempt_count: int
    finished_at: int | None
    dead_lettered_at: int | None
    reported_at: int | None
    reported_by: str | None
    report_summary: str | None


class ReportRow(NamedTuple):
    """A report, and the scan it reported while that scan is kept (else None)."""

    name: str
    version: str
    scan_id: int
    scan: PackageRow | None
    reported_at: int
    reported_by: str
    summary: str


class QueueCounts(NamedTuple):
    queued: int
    waiting: int  # QUEUED, waiting out a retry's backoff
    in_progress: int
    lapsed: int  # a lease that ran out, with attempts left
    exhausted: int  # a lease that ran out at the budget
    stranded: int  # PENDING with no lease deadline
    oldest_queued_at: int | None
    now: int


class Alerting(NamedTuple):
    threshold: int
    updated_at: int
    updated_by: str


class Suppression(NamedTuple):
    id: str
    name: str
    version: str
    rules: list[str] | None
    created_at: int
    created_by: str
    updated_at: int
    updated_by: str


class Page(NamedTuple):
    """Where a listing starts and how many it holds at most."""

    offset: int
    limit: int

    @classmethod
    def numbered(cls, page: int, size: int) -> Page:
        """Page `page` (from 1) of `size` rows."""
        return cls((page - 1) * size, size)


def _suppression(row: Row) -> Suppression:
    rules = None if row["rules"] is None else list(orjson.loads(row["rules"]))
    return Suppression(
        row["id"],
        row["name"],
        row["version"],
        rules,
        row["created_at"],
        row["created_by"],
        row["updated_at"],
        row["updated_by"],
    )


def _rules(rules: Sequence[str] | None) -> str | None:
    return None if rules is None else orjson.dumps(list(rules)).decode()


class DragonflyRecords:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def known(self, endpoint: int, pairs: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        """The pairs the endpoint already holds a scan of, in any status."""
        if not pairs:
            return set()
        items = orjson.dumps([{"name": n, "version": v} for n, v in pairs]).decode()
        async with self.db.lookup() as tx:
            rows = await tx.rows(KNOWN_PACKAGES, {"endpoint": endpoint, "items": items})
        return {(row["name"], row["version"]) for row in rows}

    async def of_name(
        self, endpoint: int, name: str, version: str | None, page: Page, *, count: bool
    ) -> tuple[list[PackageRow], int | None]:
        """The scans of a name (and version), newest first, and their count if asked."""
        params = {"endpoint": endpoint, "name": name, "version": version}
        counted = COUNT_PACKAGES_OF_NAME if count else None
        return await self._listed(PACKAGES_OF_NAME, counted, params, page)

    async def finished_since(
        self, endpoint: int, since: int, name: str | None, page: Page, *, count: bool
    ) -> tuple[list[PackageRow], int | None]:
        """The scans that finished at or after `since` (µs), newest queued first."""
        params = {"endpoint": endpoint, "since": since, "name": name}
        counted = COUNT_PACKAGES_FINISHED_SINCE if count else None
        return await self._listed(PACKAGES_FINISHED_SINCE, counted, params, page)

    async def _listed(
        self, rows_of: Sql, count_of: Sql | None, params: Mapping[str, object], page: Page
    ) -> tuple[list[PackageRow], int | None]:
        # One read transaction, so a page and its total are of one moment.
        async with self.db.read() as tx:
            found = await tx.rows(rows_of, {**params, "limit": page.limit, "offset": page.offset})
            total = None if count_of is None else int(await value(tx, count_of, params))
        return [record(PackageRow, row) for row in found], total

    async def reported(
        self, endpoint: int, since: int, name: str | None, page: Page
    ) -> tuple[list[ReportRow], int]:
        """The endpoint's reports at or after `since` (µs), newest first, and their count."""
        params = {"endpoint": endpoint, "since": since, "name": name}
        async with self.db.read() as tx:
            rows = await tx.rows(
                REPORTED_PACKAGES, params | {"limit": page.limit, "offset": page.offset}
            )
            total = int(await value(tx, COUNT_REPORTED_PACKAGES, params))
        return [_report(row) for row in rows], total

    async def report_of_name(self, endpoint: int, name: str) -> str | None:
        """The version of the name already reported, if any."""
        async with self.db.lookup() as tx:
            row = await first(tx, REPORT_OF_NAME, {"endpoint": endpoint, "name": name})
        return None if row is None else str(row["version"])

    async def record_report(
        self, endpoint: int, scan: PackageRow, *, by: str, summary: str, inspector_url: str
    ) -> bool:
        """Keep a report of the scan's package; False when its name was reported meanwhile."""
        params = {
            "endpoint": endpoint,
            "name": scan.name,
            "version": scan.version,
            "scan": scan.id,
            "by": by,
            "summary": summary,
            "inspector_url": inspector_url,
        }
        return await transact(self.db, lambda tx: first(tx, INSERT_REPORT, params)) is not None

    async def queue_status(self, endpoint: int, max_attempts: int) -> QueueCounts:
        """The endpoint's live scans by state, read at one instant."""
        params = {"endpoint": endpoint, "max_attempts": max_attempts}
        async with self.db.lookup() as tx:
            row = await first(tx, QUEUE_STATUS, params)
        assert row is not None  # an aggregate always answers one row
        counts = {key: int(row[key] or 0) for key in QueueCounts._fields[:6]}
        return QueueCounts(**counts, oldest_queued_at=row["oldest_queued_at"], now=row["now"])

    async def alerting(self, endpoint: int) -> Alerting | None:
        """The endpoint's alert threshold as last set, or None if never set."""
        async with self.db.lookup() as tx:
            row = await first(tx, ALERTING_OF, {"endpoint": endpoint})
        return None if row is None else record(Alerting, row)

    async def set_alerting(self, endpoint: int, threshold: int, *, by: str) -> Alerting:
        params = {"endpoint": endpoint, "threshold": threshold, "by": by}
        row = await transact(self.db, lambda tx: first(tx, SET_ALERTING, params))
        assert row is not None  # an upsert always returns its row
        return record(Alerting, row)

    async def suppressions(self, endpoint: int, name: str) -> list[Suppression]:
        async with self.db.lookup() as tx:
            rows = await tx.rows(SUPPRESSIONS_OF_NAME, {"endpoint": endpoint, "name": name})
        return [_suppression(row) for row in rows]

    async def suppress(
        self, key: SuppressionKey, rules: Sequence[str] | None, *, by: str
    ) -> Suppression:
        """A new suppression of the key's package version, under the key's id."""
        params = key.params() | {"rules": _rules(rules), "by": by}
        row = await transact(self.db, lambda tx: first(tx, INSERT_SUPPRESSION, params))
        assert row is not None
        return _suppression(row)

    async def suppression(self, key: SuppressionKey) -> Suppression | None:
        async with self.db.lookup() as tx:
            row = await first(tx, SUPPRESSION, key.params())
        return None if row is None else _suppression(row)

    async def update_suppression(
        self, key: SuppressionKey, rules: Sequence[str] | None, *, by: str
    ) -> Suppression | None:
        params = key.params() | {"rules": _rules(rules), "by": by}
        row = await transact(self.db, lambda tx: first(tx, UPDATE_SUPPRESSION, params))
        return None if row is None else _suppression(row)

    async def unsuppress(self, key: SuppressionKey) -> int:
        """Delete one suppression (the key's id) or, without an id, every one of the version."""
        params = key.params()
        deleting = DELETE_SUPPRESSION
        if key.id is None:
            params.pop("id")
            deleting = DELETE_VERSION_SUPPRESSIONS
        return len(await transact(self.db, lambda tx: tx.rows(deleting, params)))


class SuppressionKey(NamedTuple):
    """A suppression's address: its endpoint, normalised name, version and (if one) id."""

    endpoint: int
    name: str
    version: str
    id: str | None = None

    def params(self) -> dict[str, object]:
        return {
            "endpoint": self.endpoint,
            "name": self.name,
            "version": self.version,
            "id": self.id,
        }


def _report(row: Row) -> ReportRow:
    scan = None if row["id"] is None else record(PackageRow, row)
    return ReportRow(
        row["report_name"],
        row["report_version"],
        row["report_scan"],
        scan,
        row["reported_at"],
        row["reported_by"],
        row["report_summary"],
    )
