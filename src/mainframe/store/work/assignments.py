"""What a worker does with an assignment it holds, short of closing it: heartbeat (extend the
lease), wait (park the scan on something outside, under a lease of its own length) and resume.
Each is one statement that checks the token and is a compare-and-set on the current
assignment; only a refused one reads the scan again, to say why (results.py::refusal)."""

from __future__ import annotations

from collections.abc import Mapping

from mainframe.store.accounts.authentication import worker_of
from mainframe.store.engine.database import Database, Sql, first
from mainframe.store.engine.statements import statement
from mainframe.store.work.budget import Budget
from mainframe.store.work.leasing import Caller, LapseWatch
from mainframe.store.work.results import refusal

HEARTBEAT = statement("heartbeat")
WAIT = statement("wait")
RESUME = statement("resume")


class Assignments:
    def __init__(self, db: Database, budget: Budget, lapses: LapseWatch) -> None:
        self.db = db
        self.budget = budget
        self.lapses = lapses

    async def heartbeat(
        self, caller: Caller, scan_id: int, *, attempt: int | None, assignment_id: str | None
    ) -> int:
        """Extend the current lease (a wait keeps its own deadline); return the new deadline."""
        values = {"timeout": self.budget.job_timeout_us}
        return await self._touch(HEARTBEAT, caller, scan_id, attempt, assignment_id, values)

    async def wait(
        self,
        caller: Caller,
        scan_id: int,
        *,
        attempt: int | None,
        assignment_id: str | None,
        seconds: float,
        reason: str,
    ) -> int:
        """Park the scan for at most `seconds`; it is reclaimed if neither resume nor result
        arrives in time."""
        values = {"timeout": round(seconds * 1_000_000), "reason": reason}
        return await self._touch(WAIT, caller, scan_id, attempt, assignment_id, values)

    async def resume(
        self, caller: Caller, scan_id: int, *, attempt: int | None, assignment_id: str | None
    ) -> int:
        """End a wait: the scan is back under an ordinary lease."""
        values = {"timeout": self.budget.job_timeout_us}
        return await self._touch(RESUME, caller, scan_id, attempt, assignment_id, values)

    async def _touch(
        self,
        sql: Sql,
        caller: Caller,
        scan_id: int,
        attempt: int | None,
        assignment_id: str | None,
        values: Mapping[str, object],
    ) -> int:
        params = dict(values) | {
            "digest": caller.digest,
            "scan": scan_id,
            "attempt": attempt,
            "assignment": assignment_id,
        }
        async with self.db.single() as tx:
            row = await first(tx, sql, params)
            # Refused: the rejection is counted once this commits, then raised.
            refused = None
            if row is None:
                worker = await worker_of(tx, caller)
                refused = await refusal(
                    tx, worker, scan_id, attempt=attempt, assignment_id=assignment_id
                )
        if row is None:
            assert refused is not None
            raise refused
        deadline = row["lease_expires_at"]
        self.lapses.note(int(row["endpoint_id"]), int(deadline))
        return int(deadline)
