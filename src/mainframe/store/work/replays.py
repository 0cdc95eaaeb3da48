"""Replays: a worker that never saw the answer to an accepted result sends it again (same
scan, attempt and assignment id, same content). The attempt's history row kept the answer it
was given, the assignments leased with it (migration 0009) and the digest of its content
(migration 0015), so the replay is answered as the first time, with those jobs this worker
still holds, unexpired, and nothing is leased twice. The same assignment with other content
is refused as a conflict (`lifecycle/reports.py`)."""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from mainframe.lifecycle.reports import Closed, is_replay, replayed
from mainframe.store.accounts.authentication import Principal
from mainframe.store.engine.database import Row, Tx, first
from mainframe.store.engine.errors import Accepted, ResultConflict
from mainframe.store.engine.statements import statement

ANSWERED = statement("replayed_result")
LEASED_WITH = statement("replayed_jobs")


class Answers:
    """The accepted results of one worker's request, each looked up at most once: SQLite asks
    before it leases next jobs (none after a replay), and every dialect when it answers."""

    def __init__(self, tx: Tx, worker: Principal) -> None:
        self.tx = tx
        self.worker = worker
        self._rows: dict[tuple[int, str | None], Row | None] = {}

    async def row(self, scan_id: int, assignment_id: str | None) -> Row | None:
        """The history row that kept the answer to this assignment's result, if any."""
        key = (scan_id, assignment_id)
        if key not in self._rows:
            params = {
                "scan": scan_id,
                "assignment": assignment_id,
                "worker": self.worker.name,
                "endpoint": self.worker.endpoint_id,
            }
            self._rows[key] = await first(self.tx, ANSWERED, params)
        return self._rows[key]

    async def answer(
        self, scan_id: int, assignment_id: str | None, digest: str
    ) -> tuple[Closed, list[str]] | None:
        """The first answer to this result and the assignments leased with it; None when it
        was never accepted. ResultConflict when the accepted result said something else."""
        row = await self.row(scan_id, assignment_id)
        if row is None:
            return None
        status, fail_reason, closed_at = (
            row["settled_status"], row["settled_fail_reason"], row["closed_at"]
        )  # fmt: skip
        if not is_replay(row["result_digest"], digest):
            raise ResultConflict(Accepted(row["outcome"], status, fail_reason, closed_at))
        closed = replayed(
            scan_id=scan_id, attempt=row["attempt"], closed_at=closed_at, status=status,
            available_at=row["settled_available_at"], fail_reason=fail_reason,
        )  # fmt: skip
        return closed, [a for a in (row["next_assignments"] or "").split(",") if a]


async def still_leased(tx: Tx, worker: Principal, assignments: Sequence[str]) -> list[Row]:
    """The scans of `assignments` this worker still holds under them, unexpired."""
    # An assignment id ends with its scan's id (leasing.py mints them).
    wanted = {int(a.rpartition("-")[2]): a for a in assignments}
    if not wanted:
        return []
    params = {"ids": orjson.dumps(sorted(wanted)).decode(), "worker": worker.name}
    rows = await tx.rows(LEASED_WITH, params)
    return [row for row in rows if wanted.get(row["id"]) == row["assignment_id"]]
