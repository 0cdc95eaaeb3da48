"""What the fleet did, per endpoint and worker, by minute and by hour: scans finished, plainly
failed and dead-lettered, attempts that failed and leases that lapsed. Counted as things
happen, never by reading the scans: each process notes its committed events in memory
(`Activity.noted`, added to after commit by effects.py::note_activity) and a periodic flush
adds them to the current minute and hour of the database's clock, so no request writes for it.
A count is late by up to one flush period, and a process that dies loses at most that much; the
outcome totals and the metrics stay exact. Read by the board's charts and an endpoint's workers
at a glance."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from mainframe.store.accounts.owners import endpoint_by_name
from mainframe.store.engine.database import Database, NotFound, Tx, transact, value
from mainframe.store.engine.statements import statement
from mainframe.store.operator.overview import NOW

MINUTE_US = 60_000_000
HOUR_US = 3_600_000_000
# How long each span's rows are kept: the charts show the last hour by minute and the last
# day by hour; a little more, so the oldest bar is whole.
KEPT_US = {"minute": 2 * HOUR_US, "hour": 48 * HOUR_US}
KINDS = ("finished", "failed", "dead_lettered", "attempt_failures", "lapsed")

ADD = statement("add_activity")
PRUNE = statement("prune_activity")
CHART = statement("activity_chart")
WORKERS_LAST_HOUR = statement("workers_last_hour")
LEASES_HELD = statement("leases_held")


@dataclass(frozen=True, slots=True)
class Bar:
    """One bar of a chart: what the owner's fleet did in one minute or hour."""

    at: int
    finished: int
    failed: int
    dead_lettered: int


@dataclass(frozen=True, slots=True)
class WorkerHour:
    """A worker over the last hour, and the leases it holds now."""

    finished: int
    failed: int  # failed attempts, the last of a dead letter's included
    lapsed: int
    leases_held: int


class Activity:
    """This process's activity since the last flush, and the reads of what was flushed."""

    def __init__(self, db: Database) -> None:
        self.db = db
        # What this process's committed events counted since the last flush, by (endpoint id,
        # worker, kind): effects.py adds to it after each commit, as it does to the metrics.
        self.noted: Counter[tuple[int, str, str]] = Counter()

    async def flush(self) -> int:
        """Add what was noted to the current minute and hour; how many counts it added."""
        if not self.noted:
            return 0
        noted, self.noted = self.noted, Counter()
        rows: dict[tuple[int, str], dict[str, int]] = {}
        for (endpoint, worker, kind), n in noted.items():
            rows.setdefault((endpoint, worker), dict.fromkeys(KINDS, 0))[kind] += n
        params = [
            {"endpoint": e, "worker": w, "span": span, "span_us": span_us} | counts
            for (e, w), counts in sorted(rows.items())
            for span, span_us in (("minute", MINUTE_US), ("hour", HOUR_US))
        ]

        async def add(tx: Tx) -> None:
            await tx.many(ADD, params)
            for span, kept in KEPT_US.items():
                await tx.run(PRUNE, {"span": span, "kept": kept})

        try:
            await transact(self.db, add)
        except Exception:
            self.noted.update(noted)  # kept for the next flush, which adds them then
            raise
        return sum(noted.values())

    async def chart(self, owner_id: int, *, span: str, bars: int) -> list[Bar]:
        """The owner's last `bars` minutes or hours, oldest first, empty ones included."""
        width = MINUTE_US if span == "minute" else HOUR_US
        async with self.db.read() as tx:
            now = int(await value(tx, NOW))
            since = now - now % width - (bars - 1) * width
            params = {"owner": owner_id, "span": span, "since": since}
            found = {
                int(row["at_us"]): Bar(
                    int(row["at_us"]),
                    int(row["finished"]),
                    int(row["failed"]),
                    int(row["dead_lettered"]),
                )
                for row in await tx.rows(CHART, params)
            }
        starts = [since + i * width for i in range(bars)]
        return [found.get(at) or Bar(at, 0, 0, 0) for at in starts]

    async def workers(self, owner_id: int, endpoint: str) -> dict[str, WorkerHour]:
        """Each worker of the owner's endpoint that did anything in the last hour or holds
        leases now (NotFound for another owner's endpoint)."""
        async with self.db.read() as tx:
            found = await endpoint_by_name(tx, endpoint)
            if found is None or found.owner_id != owner_id:
                raise NotFound(f"no endpoint named {endpoint!r}")
            hour = await tx.rows(WORKERS_LAST_HOUR, {"endpoint": found.id})
            held = dict(await _pairs(tx, found.id))
        workers = {
            str(row["worker"]): WorkerHour(
                int(row["finished"]),
                int(row["attempt_failures"]),
                int(row["lapsed"]),
                held.get(str(row["worker"]), 0),
            )
            for row in hour
        }
        for worker, n in held.items():
            workers.setdefault(worker, WorkerHour(0, 0, 0, n))
        return workers


async def _pairs(tx: Tx, endpoint_id: int) -> list[tuple[str, int]]:
    rows = await tx.rows(LEASES_HELD, {"endpoint": endpoint_id})
    return [(str(row["worker"]), int(row["leases"])) for row in rows if row["worker"] is not None]
