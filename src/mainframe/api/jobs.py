"""Worker routes: the job poll, results (single and batch), heartbeats, waits, resumes."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request

from mainframe.api import shapes
from mainframe.api.deps import RuntimeDep, WorkerDep
from mainframe.api.errors import store_error_body
from mainframe.api.fastpath import body_doc, json_body, worker_of
from mainframe.api.jsonvalue import stored
from mainframe.api.responses import JSON
from mainframe.api.schemas import (
    MAX_RESULT_BYTES,
    AsciiInt,
    BatchResults,
    BatchStatuses,
    Echo,
    ErrorBody,
    JobPublic,
    LeaseDeadline,
    ResultBody,
    ResultPublic,
    WaitBody,
)
from mainframe.clock import rfc3339
from mainframe.lifecycle.rules import EchoError, require_echo_pair
from mainframe.store import Invalid, ItemOutcome, Report

router = APIRouter(prefix="/api/v1/jobs", tags=["worker"])
ScanIdPath = Annotated[int, Path(ge=1, le=2**62, description="The scan's id."), AsciiInt]
REFUSALS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in (400, 401, 404, 409, 413, 422, 503)
}
# Routes that read the token themselves still declare the bearer scheme in the document.
BEARER: dict[str, Any] = {"security": [{"HTTPBearer": []}]}


@router.post("", response_model=list[JobPublic], responses=REFUSALS, openapi_extra=BEARER)
async def lease_jobs(
    request: Request,
    batch: Annotated[int, Query(ge=1, le=100, description="Scans to lease at most."), AsciiInt] = 1,
) -> JSON:
    """The job poll: reaps this endpoint's lapsed leases when one may be due, then leases up
    to `batch` due scans, oldest first."""
    rt, worker = await worker_of(request)
    jobs = await rt.run(rt.store.leasing.lease, worker, batch)
    return JSON([shapes.job(job) for job in jobs])


def _report(body: ResultBody) -> Report:
    _echo(body)
    result = stored(body.result, field="body.result", limit=MAX_RESULT_BYTES)
    return Report(
        body.outcome,
        body.retryable,
        body.attempt,
        body.assignment_id,
        body.summary,
        body.artifact,
        result,
        body.retry_after_seconds,
    )


@router.post("/results", response_model=BatchStatuses, responses=REFUSALS)
async def report_results(rt: RuntimeDep, worker: WorkerDep, body: BatchResults) -> JSON:
    """Up to 100 independent results; each item gets the status the single route would give."""
    statuses: list[dict[str, Any] | None] = []
    valid: list[tuple[int, Report]] = []
    for item in body.results:
        try:
            valid.append((item.scan_id, _report(item)))
            statuses.append(None)
        except Invalid as exc:
            statuses.append(_item_status(ItemOutcome(item.scan_id, None, exc)))
    applied = iter(await rt.run(rt.store.results.report_many, worker, valid))
    merged = [status or _item_status(next(applied)) for status in statuses]
    return JSON({"results": merged})


def _item_status(outcome: ItemOutcome) -> dict[str, Any]:
    if outcome.error is None:
        assert outcome.closed is not None
        return {"scan_id": outcome.scan_id, "status": 200, "scan": shapes.closed(outcome.closed)}
    status, code, detail = store_error_body(outcome.error)
    return {"scan_id": outcome.scan_id, "status": status, "error": code, "detail": detail}


@router.post(
    "/{scan_id}/result",
    response_model=ResultPublic,
    responses=REFUSALS,
    openapi_extra=BEARER | body_doc(ResultBody),
)
async def report_result(request: Request, scan_id: ScanIdPath) -> JSON:
    """Close the current attempt. Stale results are refused with 409 and change nothing."""
    rt, worker = await worker_of(request)
    body = await json_body(request, ResultBody)
    closed = await rt.run(rt.store.results.report, worker, scan_id, _report(body))
    return JSON(shapes.closed(closed))


def _echo(body: Echo) -> tuple[int | None, str | None]:
    try:
        require_echo_pair(body.attempt, body.assignment_id)
    except EchoError as exc:
        raise Invalid(
            "body.assignment_id" if body.assignment_id is None else "body.attempt", str(exc)
        ) from None
    return body.attempt, body.assignment_id


def _deadline(scan_id: int, until: int) -> JSON:
    return JSON({"scan_id": scan_id, "lease_expires_at": rfc3339(until)})


@router.post(
    "/{scan_id}/heartbeat",
    response_model=LeaseDeadline,
    responses=REFUSALS,
    openapi_extra=BEARER | body_doc(Echo),
)
async def heartbeat(request: Request, scan_id: ScanIdPath) -> JSON:
    """Extend the lease of the current assignment by the job timeout."""
    rt, worker = await worker_of(request)
    attempt, assignment = _echo(await json_body(request, Echo))
    until = await rt.run(
        rt.store.results.heartbeat, worker, scan_id, attempt=attempt, assignment_id=assignment
    )
    return _deadline(scan_id, until)


@router.post("/{scan_id}/wait", response_model=LeaseDeadline, responses=REFUSALS)
async def wait(rt: RuntimeDep, worker: WorkerDep, scan_id: ScanIdPath, body: WaitBody) -> JSON:
    """Park the scan while it waits on something outside, for at most `seconds`."""
    attempt, assignment = _echo(body)
    if body.seconds > rt.settings.max_wait_seconds:
        raise Invalid(
            "body.seconds", f"a wait lasts at most {rt.settings.max_wait_seconds} seconds"
        )
    until = await rt.run(
        rt.store.results.wait,
        worker,
        scan_id,
        attempt=attempt,
        assignment_id=assignment,
        seconds=body.seconds,
        reason=body.reason,
    )
    return _deadline(scan_id, until)


@router.post("/{scan_id}/resume", response_model=LeaseDeadline, responses=REFUSALS)
async def resume(rt: RuntimeDep, worker: WorkerDep, scan_id: ScanIdPath, body: Echo) -> JSON:
    """End a wait; the scan is back under an ordinary lease."""
    attempt, assignment = _echo(body)
    until = await rt.run(
        rt.store.results.resume, worker, scan_id, attempt=attempt, assignment_id=assignment
    )
    return _deadline(scan_id, until)
