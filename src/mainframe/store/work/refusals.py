"""Why a write against an assignment was refused: a result, heartbeat, wait or resume whose
compare-and-set missed reads the scan again, says why in the lifecycle's words
(`lifecycle.rules.diagnose_stale`), and records the rejection, counted once it commits."""

from __future__ import annotations

from mainframe.lifecycle.events import StaleResultRejected
from mainframe.lifecycle.rules import Holding, StaleCode, Status, diagnose_stale
from mainframe.store.accounts.authentication import Principal
from mainframe.store.engine.database import Tx, first
from mainframe.store.engine.errors import NotFound, Stale, StoreError
from mainframe.store.engine.statements import statement

DIAGNOSE = statement("diagnose_refusal")


async def refusal(
    tx: Tx, worker: Principal, scan_id: int, *, attempt: int | None, assignment_id: str | None
) -> StoreError:
    """NotFound, or the stale code the rule names, with its rejection event on `tx`."""
    assert worker.endpoint_id is not None and worker.endpoint is not None
    found = await first(tx, DIAGNOSE, {"scan": scan_id, "endpoint": worker.endpoint_id})
    if found is None:
        return NotFound(f"no scan {scan_id} for this endpoint")
    holding = Holding(
        Status(found["status"]), found["attempt_count"], found["assignment_id"], found["worker"]
    )
    code = diagnose_stale(holding, worker=worker.name, attempt=attempt, assignment_id=assignment_id)
    # The compare-and-set missed, so something differs even when the rule sees none: a
    # concurrent writer moved the row between the two statements.
    code = code or StaleCode.STALE_ASSIGNMENT
    tx.events.append(StaleResultRejected(worker.endpoint, scan_id, worker.name, code, attempt))
    return Stale(code)
