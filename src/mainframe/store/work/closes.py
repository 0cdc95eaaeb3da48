"""How a request's results are closed on each database, chosen once where the store is built
(`Store.build`): PostgreSQL runs the whole request as one statement (COMPLETE: the token
check, the closes, their history rows and outcome totals, and the next leases); SQLite runs
the same steps as statements of one transaction, inline (microseconds each)."""

from __future__ import annotations

import secrets
from collections.abc import Container, Mapping, Sequence
from typing import Protocol

import orjson

from mainframe.lifecycle.causes import named
from mainframe.lifecycle.elsewhere import ASKING_US
from mainframe.lifecycle.outcomes import increments, shard_of
from mainframe.lifecycle.reports import Plan, history_row
from mainframe.lifecycle.scans import ScanRecord
from mainframe.store.accounts.authentication import Principal, worker_of
from mainframe.store.engine.database import Row, Tx
from mainframe.store.engine.statements import statement
from mainframe.store.work.budget import Budget
from mainframe.store.work.closing import BUMP, INSERT_HISTORY, NAME_CAUSE
from mainframe.store.work.leasing import LEASE, Caller, lease_params
from mainframe.store.work.replays import Answers

COMPLETE = statement("complete")
CLOSE_RESULTS = statement("close_results")


class Sender:
    """The worker behind one request's token, authenticated at most once and only when the
    request needs it (a refusal, a replay, SQLite's steps), and its accepted results, each
    looked up at most once."""

    def __init__(self, tx: Tx, caller: Caller) -> None:
        self.tx = tx
        self.caller = caller
        self._worker: Principal | None = None
        self._answers: Answers | None = None

    async def worker(self) -> Principal:
        if self._worker is None:
            self._worker = await worker_of(self.tx, self.caller)
        return self._worker

    async def answers(self) -> Answers:
        if self._answers is None:
            self._answers = Answers(self.tx, await self.worker())
        return self._answers


class Closes(Protocol):
    """A request's closes and next leases, then what the closes leave to write."""

    async def close(
        self, sender: Sender, plans: list[Plan], fetch: int
    ) -> tuple[list[Row], list[Row]]:
        """The closed rows and the leased rows of the request."""
        ...

    async def recorded(
        self, tx: Tx, plans: list[Plan], closes: Mapping[int, ScanRecord], leased: Sequence[Row]
    ) -> None:
        """Each closed attempt's history row and the causes met."""
        ...

    async def counted(self, tx: Tx) -> None:
        """The outcome totals of what the request ended (its events)."""
        ...


class InOneStatement:
    """PostgreSQL: COMPLETE does everything, history and totals included."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget

    async def close(
        self, sender: Sender, plans: list[Plan], fetch: int
    ) -> tuple[list[Row], list[Row]]:
        tx = sender.tx
        params = {
            "digest": sender.caller.digest,
            "items": _items(plans),
            "fetch": fetch,
            "prefix": secrets.token_hex(8) + "-",
            "timeout": self.budget.job_timeout_us,
            "elsewhere": self.budget.elsewhere_us,
            "asking": ASKING_US,
            # The totals row of this session, as every other close picks it.
            "shard": shard_of(tx.session),
        }
        rows = await tx.rows(COMPLETE, params)
        # Each row says what was done to its scan (`done`: 'closed' or 'leased') beside the scan.
        closed = [row for row in rows if row["done"] == "closed"]
        return closed, [row for row in rows if row["done"] == "leased"]

    async def recorded(
        self, tx: Tx, plans: list[Plan], closes: Mapping[int, ScanRecord], leased: Sequence[Row]
    ) -> None:
        return None

    async def counted(self, tx: Tx) -> None:
        return None


class InSteps:
    """SQLite: COMPLETE's closes and next leases as statements of one transaction, then the
    history once the rows are records, and the totals once the answers made the events."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget

    async def close(
        self, sender: Sender, plans: list[Plan], fetch: int
    ) -> tuple[list[Row], list[Row]]:
        tx, worker = sender.tx, await sender.worker()
        params = {"items": _items(plans), "endpoint": worker.endpoint_id, "worker": worker.name}
        closed = {row["id"]: row for row in await tx.rows(CLOSE_RESULTS, params)}
        leased: list[Row] = []
        if closed and fetch > 0 and not await _any_replay(sender, plans, closed):
            leased = await tx.rows(LEASE, lease_params(sender.caller, fetch, self.budget))
        return list(closed.values()), leased

    async def recorded(
        self, tx: Tx, plans: list[Plan], closes: Mapping[int, ScanRecord], leased: Sequence[Row]
    ) -> None:
        nexts = ",".join(row["assignment_id"] for row in leased) or None
        firsts = {p.scan_id: p for p in reversed(plans)}
        await tx.many(
            INSERT_HISTORY,
            [history_row(scan, firsts[scan_id], nexts) for scan_id, scan in closes.items()],
        )
        await tx.many(NAME_CAUSE, named(firsts[scan_id].cause for scan_id in closes))

    async def counted(self, tx: Tx) -> None:
        await tx.many(BUMP, increments(tx.events, tx.session))


def for_dialect(dialect: str, budget: Budget) -> Closes:
    """The closes of `dialect`, chosen once where the store is built."""
    return InOneStatement(budget) if dialect == "postgresql" else InSteps(budget)


async def _any_replay(sender: Sender, plans: list[Plan], closed: Container[int]) -> bool:
    for p in plans:
        if p.scan_id in closed:
            continue
        if await (await sender.answers()).row(p.scan_id, p.assignment):
            return True
    return False


def _items(plans: list[Plan]) -> str:
    """The JSON items of a request's closes: the first result per scan (a scan named again in
    the same request is the same result twice, refused as stale when answered)."""
    firsts = {p.scan_id: p for p in reversed(plans)}
    return orjson.dumps([p.values() for p in plans if firsts[p.scan_id] is p]).decode()
