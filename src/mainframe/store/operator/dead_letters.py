"""The operator's listing of dead letters: every scan in FAILED that will never be retried,
across the endpoints an owner holds, newest first, searchable, with its final attempt.

Every statement carries `scans.dead_lettered_at IS NOT NULL` as written in the partial
indexes' predicate, so both planners can use them: `ix_scans_dead_recent` (dead_lettered_at,
id) walks the listing's order, `ix_scans_dead_letters` (endpoint_id, dead_lettered_at, id)
one endpoint's, and `ix_scans_dead_search` (trigrams, PostgreSQL) a substring search. The
keyset is always bound (the first page's is NEWEST): an optional keyset is an OR no planner
can seek through, so a later page would read every row before it; the way back from a
later page walks the same index forwards from its cursor. The count without a search or a
time is a sum of kept counts, never a scan count: the dead letters per endpoint and cause
(migration 0017), or with a reason or a queue per endpoint, cause, queue and reason (the
`counts_now` migration), each kept by triggers in the transaction of every change, a
prune's too. A search's or a time's count reads the matching dead letters, exactly."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from mainframe.contract.limits import MAX_QUERY_LENGTH
from mainframe.lifecycle.causes import Cause
from mainframe.lifecycle.scans import AttemptRecord, ScanRecord, attempt_from_row, scan_from_row
from mainframe.store.accounts.audit import Origin
from mainframe.store.engine.database import Conflict, Database, Row, Sql, Tx, first
from mainframe.store.engine.statements import statement
from mainframe.store.operator import causes
from mainframe.store.operator.redrive import Progress, Redriven, redrive
from mainframe.store.work import queries, search

__all__ = ["MAX_QUERY_LENGTH", "DeadLetterFilter", "DeadLetters"]

# The keyset of the first page: after it in the listing's order comes every dead letter.
NEWEST = (2**63 - 1, 2**63 - 1)

LIST_DEAD_LETTERS = statement("list_dead_letters")
LIST_DEAD_LETTERS_OF_CAUSE = statement("list_dead_letters_of_cause")
SEARCH_DEAD_LETTERS = statement("search_dead_letters")
LIST_DEAD_LETTERS_NEWER = statement("list_dead_letters_newer")
LIST_DEAD_LETTERS_OF_CAUSE_NEWER = statement("list_dead_letters_of_cause_newer")
SEARCH_DEAD_LETTERS_NEWER = statement("search_dead_letters_newer")
COUNT_DEAD_LETTERS = statement("count_dead_letters")
DEAD_LETTER_IDS = statement("dead_letter_ids")
DEAD_LETTER_TOTAL = statement("dead_letter_total")
DEAD_LETTERS_BY_KEY = statement("dead_letters_by_key")
PLAN_WITH_VALUES = statement("plan_with_values")


@dataclass(frozen=True, slots=True)
class DeadLetterFilter:
    """What narrows the listing; every field optional. `since` is microseconds."""

    q: str | None = None
    reason: str | None = None
    since: int | None = None
    endpoint: str | None = None
    queue: str | None = None
    cause: str | None = None  # a cause's key (lifecycle/causes.py)

    @property
    def narrows(self) -> bool:
        """Whether anything beyond a choice of endpoint and cause narrows the rows."""
        return bool(self.q) or any(v is not None for v in (self.reason, self.since, self.queue))

    @property
    def searches(self) -> bool:
        """Whether the count must read the dead letters: a search or a time, which no kept
        count holds."""
        return bool(self.q) or self.since is not None

    def as_json(self) -> dict[str, Any]:
        """The filter as a filter redrive's audit row keeps it."""
        return {
            "q": self.q,
            "reason": self.reason,
            "since": self.since,
            "endpoint": self.endpoint,
            "queue": self.queue,
            "cause": self.cause,
        }

    def params(self, owner_id: int) -> dict[str, Any]:
        """The parameters every dead-letter statement of this filter takes."""
        return {
            "owner": owner_id,
            "endpoint": self.endpoint,
            "reason": self.reason,
            "since": self.since,
            "queue": self.queue,
            "cause": self.cause,
        } | search.terms(self.q)


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A dead letter as listed: the scan, the attempt that closed it (None if none) and its
    cause (lifecycle/causes.py)."""

    scan: ScanRecord
    final_attempt: AttemptRecord | None
    cause: Cause | None = None


@dataclass(frozen=True, slots=True)
class Tally:
    """How many dead letters a filter matches now, and how many of them a filter redrive
    would requeue (those on endpoints that are not revoked)."""

    matching: int
    redrivable: int


@dataclass(frozen=True, slots=True)
class DeadLetterPage:
    items: list[DeadLetter]
    next_cursor: tuple[int, int] | None  # (dead_lettered_at, id) of the last item
    count: int
    # The first item's keyset, for the page before this one; None on the first page.
    newer_cursor: tuple[int, int] | None = None
    redrivable: int = 0  # of the `count`, those a filter redrive would requeue now


async def count(tx: Tx, owner_id: int, f: DeadLetterFilter) -> Tally:
    """How many dead letters match now, and how many of them could be redriven: the kept
    counts (of the owner's endpoints, of one cause, or by queue and reason) unless the
    filter searches or names a time, then a count of the matching dead letters."""
    params = {"owner": owner_id, "endpoint": f.endpoint}
    if f.searches:
        row = await first(tx, COUNT_DEAD_LETTERS, f.params(owner_id))
    elif f.reason is not None or f.queue is not None:
        keyed = {"cause": f.cause, "queue": f.queue, "reason": f.reason}
        row = await first(tx, DEAD_LETTERS_BY_KEY, params | keyed)
    elif f.cause is not None:
        row = await first(tx, causes.DEAD_LETTERS_OF_CAUSE, params | {"cause": f.cause})
    else:
        row = await first(tx, DEAD_LETTER_TOTAL, params)
    if row is None:
        return Tally(0, 0)
    return Tally(int(row["matching"] or 0), int(row["redrivable"] or 0))


async def page(
    tx: Tx,
    owner_id: int,
    f: DeadLetterFilter,
    *,
    after: tuple[int, int] | None,
    limit: int,
    newer_than: tuple[int, int] | None = None,
) -> DeadLetterPage:
    """One page newest first, strictly after the keyset `after` (or, given `newer_than`, the
    page just before that keyset: the first page when fewer than a page lie above it)."""
    if newer_than is not None:
        params = f.params(owner_id) | {
            "newer_at": newer_than[0], "newer_id": newer_than[1], "limit": limit + 1,
        }  # fmt: skip
        rows = await tx.rows(_listing(f, newer=True), params)
        if len(rows) > limit:
            items = [_dead_letter(row) for row in reversed(rows[:limit])]
            tally = await count(tx, owner_id, f)
            return DeadLetterPage(
                items, _keyset(items[-1]), tally.matching, _keyset(items[0]), tally.redrivable
            )
        after = None
    after_at, after_id = after or NEWEST
    params = f.params(owner_id) | {"after_at": after_at, "after_id": after_id, "limit": limit}
    rows = await tx.rows(_listing(f, newer=False), params)
    items = [_dead_letter(row) for row in rows]
    cursor = _keyset(items[-1]) if len(items) == limit else None
    newer = _keyset(items[0]) if after is not None and items else None
    tally = await count(tx, owner_id, f)
    return DeadLetterPage(items, cursor, tally.matching, newer, tally.redrivable)


def _listing(f: DeadLetterFilter, *, newer: bool) -> Sql:
    """The statement that walks the index serving this filter: the search's, one cause's,
    or the listing's order."""
    if f.q:
        return SEARCH_DEAD_LETTERS_NEWER if newer else SEARCH_DEAD_LETTERS
    if f.cause is not None:
        return LIST_DEAD_LETTERS_OF_CAUSE_NEWER if newer else LIST_DEAD_LETTERS_OF_CAUSE
    return LIST_DEAD_LETTERS_NEWER if newer else LIST_DEAD_LETTERS


def _keyset(item: DeadLetter) -> tuple[int, int]:
    return int(item.scan.dead_lettered_at or 0), item.scan.id


def _dead_letter(row: Row) -> DeadLetter:
    """A listed row: the scan's columns, its endpoint's name (`endpoint`), and its final
    attempt's columns named `final_…` (all NULL when it was never leased)."""
    final = _Final(row)
    final_attempt = None if final["seq"] is None else attempt_from_row(final)
    return DeadLetter(scan_from_row(row, row["endpoint"]), final_attempt)


class _Final:
    """The final attempt's columns of a listed row, read by the attempt's own column names
    (they are aliased `final_…`: the scan's `worker` and `leased_at` have the same names)."""

    __slots__ = ("_row",)

    def __init__(self, row: Row) -> None:
        self._row = row

    def __getitem__(self, column: str, /) -> Any:
        return self._row[f"final_{column}"]


class DeadLetters:
    """The owner's dead letters: list, count, open one, redrive. With `plan_with_values`
    (PostgreSQL's, whose prepared statements may keep a generic plan; Store.build says), a
    read narrowed beyond an endpoint first plans its transaction with the values."""

    def __init__(self, db: Database, *, plan_with_values: bool) -> None:
        self.db = db
        self.plan_with_values = plan_with_values

    async def _with_values(self, tx: Tx, f: DeadLetterFilter) -> None:
        """Before a listing or count narrowed beyond an endpoint: plan the transaction's
        statements with their values (a generic plan guesses a cause holds a few dead
        letters and would sort all of a big one's, and cannot seek the index to `since`, so
        it counts every dead letter of the owner)."""
        if self.plan_with_values and (f.narrows or f.cause):
            await tx.run(PLAN_WITH_VALUES)

    async def page(
        self,
        owner_id: int,
        f: DeadLetterFilter,
        *,
        after: tuple[int, int] | None,
        limit: int,
        newer_than: tuple[int, int] | None = None,
    ) -> DeadLetterPage:
        """One page newest first after the keyset `after` (or the page before the keyset
        `newer_than`), with how many match in all."""
        async with self.db.read() as tx:
            await self._with_values(tx, f)
            found = await page(tx, owner_id, f, after=after, limit=limit, newer_than=newer_than)
            named = await causes.causes_of(tx, owner_id, [item.scan.id for item in found.items])
        items = [replace(item, cause=named.get(item.scan.id)) for item in found.items]
        return replace(found, items=items)

    async def count(self, owner_id: int, f: DeadLetterFilter) -> int:
        """How many dead letters the filter matches (the Dead pill, a redrive's question)."""
        async with self.db.read() as tx:
            await self._with_values(tx, f)
            return (await count(tx, owner_id, f)).matching

    async def redrivable(self, owner_id: int, f: DeadLetterFilter) -> int:
        """How many dead letters a filter redrive would requeue: what its `confirm` states
        (a revoked endpoint's dead letters match the filter but are never redriven)."""
        async with self.db.read() as tx:
            await self._with_values(tx, f)
            return (await count(tx, owner_id, f)).redrivable

    async def get(self, owner_id: int, scan_id: int) -> ScanRecord:
        """The scan with its whole attempt history (any status: a redriven one too)."""
        async with self.db.read() as tx:
            return await queries.owned_scan(tx, owner_id, scan_id)

    async def redrive_ids(
        self,
        owner_id: int,
        ids: Sequence[int],
        *,
        origin: Origin,
        progress: Progress | None = None,
    ) -> Redriven:
        """Redrive the given scans; those that cannot be are reported as skipped."""
        return await redrive(self.db, owner_id, ids, by="ids", origin=origin, progress=progress)

    async def redrive_filter(
        self,
        owner_id: int,
        f: DeadLetterFilter,
        *,
        confirm: int,
        origin: Origin,
        progress: Progress | None = None,
    ) -> Redriven:
        """Redrive what the filter matches, refused (nothing changed) unless `confirm` is
        how many it matches now: a stale screen cannot requeue more than the operator saw."""
        async with self.db.read() as tx:
            await self._with_values(tx, f)
            found = await tx.rows(DEAD_LETTER_IDS, f.params(owner_id))
            ids = [int(row["id"]) for row in found]
        if len(ids) != confirm:
            raise Conflict(
                "count_changed",
                f"the filter matches {len(ids)} dead letters to redrive now, not {confirm}; "
                "look again and confirm the new count",
            )
        return await redrive(
            self.db, owner_id, ids, by="filter", origin=origin, filter_json=f.as_json(),
            progress=progress,
        )  # fmt: skip
