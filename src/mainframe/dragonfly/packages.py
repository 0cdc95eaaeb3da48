"""The loader's and the bot's rules as pure functions over plain data: which lookups a query
asks for, a scan as the bot's Package, the queue's status, a report's target, a page. The
routes (`deployment.py`) do the I/O; docs/dragonfly.md says what each follows upstream in."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from mainframe.clock import MICROS
from mainframe.contract.dragonfly_schemas import PackagePage, PackagePublic, QueueStatusPublic
from mainframe.dragonfly.jobs import distributions
from mainframe.lifecycle.rules import Status
from mainframe.store import Conflict, NotFound, StoreError
from mainframe.store.dragonfly.records import PackageRow, Page, QueueCounts, ReportRow

# A bare array of packages holds at most this many; past it the lookup is refused rather
# than cut short, and a page (`page` and `size`) reads any number.
MAX_UNPAGED = 10_000
MAX_PAGE_SIZE = 100
# The threshold an endpoint's bot alerts at until someone sets one (upstream's seed).
DEFAULT_THRESHOLD = 8
_STATUS = {
    Status.QUEUED: "queued",
    Status.PENDING: "pending",
    Status.FINISHED: "finished",
    Status.FAILED: "failed",
}


class BadRequest(StoreError):
    """A request the routes refuse with 400, as dragonfly-mainframe did."""

    code = "bad_request"


def normalized(name: str) -> str:
    """A package name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True, slots=True)
class Lookup:
    """What `GET /package` asks for: a name (and version), or what finished since a time
    (of a name), a bare array or one page."""

    name: str | None
    version: str | None
    since_us: int | None
    page: int | None
    size: int | None

    @property
    def paged(self) -> bool:
        return self.page is not None and self.size is not None

    @property
    def window(self) -> Page:
        """The rows to read: the page asked for, or one more than a bare array may hold (so
        that too many is told from just enough)."""
        if self.page is not None and self.size is not None:
            return Page.numbered(self.page, self.size)
        return Page(0, MAX_UNPAGED + 1)


def lookup(
    name: str | None, version: str | None, since: int | None, page: int | None, size: int | None
) -> Lookup:
    """The lookup the query asks for; BadRequest for the combinations upstream refuses (no
    name and no `since`, or `version` with `since`)."""
    if (name is None and since is None) or (version is not None and since is not None):
        raise BadRequest("send name, name and version, name and since, or since")
    since_us = None if since is None else max(since, 0) * MICROS
    # Upstream pages only when both are set (and non-zero); otherwise a bare array.
    paged = bool(page) and bool(size)
    return Lookup(name, version, since_us, page if paged else None, size if paged else None)


def page_of(items: list[PackagePublic], total: int, page: int, size: int) -> PackagePage:
    return PackagePage(
        items=items, total=total, page=page, size=size, pages=math.ceil(total / size)
    )


def _seconds(us: int | None) -> int | None:
    return None if us is None else us // MICROS


def _result(text: str | None) -> dict[str, Any]:
    """A finished scan's result as an object; anything else (another kind's result, not
    JSON) reads as empty, so the lookup shows nulls rather than failing."""
    if text is None:
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def package(row: PackageRow) -> PackagePublic:
    """A scan as the bot's Package: a failure (or dead letter) has no `finished_at`, as
    upstream's had none."""
    status = Status(row.status)
    finished = status is Status.FINISHED
    result = _result(row.result) if finished else {}
    rules = result.get("rules_matched")
    return PackagePublic(
        scan_id=str(row.id),
        name=row.name,
        version=row.version,
        status=_STATUS.get(status),
        score=_int(result.get("score")),
        inspector_url=_str(result.get("inspector_url")),
        rules=[r for r in rules if isinstance(r, str)] if isinstance(rules, list) else [],
        download_urls=distributions(row.payload),
        queued_at=_seconds(row.created_at),
        queued_by=row.source,
        reported_at=_seconds(row.reported_at),
        reported_by=row.reported_by,
        report_summary=row.report_summary,
        pending_at=_seconds(row.leased_at),
        pending_by=row.worker,
        attempt_count=row.attempt_count,
        dead_lettered_at=_seconds(row.dead_lettered_at),
        finished_at=_seconds(row.finished_at) if finished else None,
        finished_by=row.worker if finished else None,
        commit_hash=_str(result.get("commit")),
    )


def reported_package(found: ReportRow) -> PackagePublic:
    """A report as a Package: its scan's, or (the scan pruned since) the report's own."""
    if found.scan is not None:
        return package(found.scan)
    return PackagePublic(
        scan_id=str(found.scan_id),
        name=found.name,
        version=found.version,
        status=None,
        score=None,
        inspector_url=None,
        rules=[],
        download_urls=[],
        queued_at=None,
        queued_by=None,
        reported_at=_seconds(found.reported_at),
        reported_by=found.reported_by,
        report_summary=found.summary,
        pending_at=None,
        pending_by=None,
        attempt_count=0,
        dead_lettered_at=None,
        finished_at=None,
        finished_by=None,
        commit_hash=None,
    )


def queue_status(counts: QueueCounts) -> QueueStatusPublic:
    """The bot's QueueStatus: a retry waiting out its backoff and a lapsed lease with attempts
    left are both `retryable`, and the backlog is what is queued or retryable."""
    retryable = counts.waiting + counts.lapsed
    oldest = counts.oldest_queued_at
    return QueueStatusPublic(
        queued=counts.queued,
        in_progress=counts.in_progress,
        retryable=retryable,
        exhausted=counts.exhausted,
        stranded=counts.stranded,
        total_backlog=counts.queued + retryable,
        oldest_queued_at=_seconds(oldest),
        oldest_age_seconds=None if oldest is None else max(counts.now - oldest, 0) // MICROS,
        sampled_at=counts.now // MICROS,
    )


@dataclass(frozen=True, slots=True)
class ReportTarget:
    """The scan a report names and the inspector URL it will carry."""

    scan: PackageRow
    inspector_url: str
    rules: list[str]


def report_target(
    scans_of_name: Sequence[PackageRow],
    *,
    version: str,
    reported_version: str | None,
    inspector_url: str | None,
) -> ReportTarget:
    """The scan to report, refused in upstream's order: no scan of the name (404), a version
    of it already reported (409), no scan of the version (404), no inspector URL (400)."""
    if not scans_of_name:
        raise NotFound("no scan of this package name on the endpoint")
    if reported_version is not None:
        raise Conflict(
            "already_reported", f"this package was already reported (version {reported_version})"
        )
    scan = next((row for row in scans_of_name if row.version == version), None)
    if scan is None:
        raise NotFound("no scan of this version on the endpoint")
    shown = package(scan)
    url = inspector_url or shown.inspector_url
    if not url:
        raise BadRequest("send inspector_url: the scan has none")
    return ReportTarget(scan, url, shown.rules)
