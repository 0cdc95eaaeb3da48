"""Worker routes: the job poll, results (single and batch), heartbeats, waits, resumes."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from mainframe.contract.limits import (
    JOBS_PATH,
    MAX_ID,
    MAX_LEASE_BATCH,
    MAX_NEXT,
    MAX_RESULT_BYTES,
)
from mainframe.contract.schemas import (
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
from mainframe.lifecycle.rules import EchoError, require_echo_pair
from mainframe.shapes import scans as shapes
from mainframe.store import Invalid, ItemOutcome, Report
from mainframe.web import JSON, IntParam, body_doc, documented, json_body, presented, stored

router = APIRouter(prefix=JOBS_PATH, tags=["worker"])
SCAN_ID = IntParam("scan_id", "path", 1, MAX_ID, "The scan's id.")
BATCH = IntParam("batch", "query", 1, MAX_LEASE_BATCH, "Scans to lease at most.", default=1)
NEXT = IntParam(
    "next",
    "query",
    0,
    MAX_NEXT,
    "Also lease up to this many next jobs in the same transaction, returned as `next` "
    "(complete-and-fetch); a replayed request gets the same jobs back.",
)
REFUSALS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in (400, 401, 404, 409, 413, 422, 503)
}
# Routes that read the token themselves still declare the bearer scheme in the document.
BEARER: dict[str, Any] = {"security": [{"HTTPBearer": []}]}


@router.post(
    "",
    response_model=list[JobPublic],
    responses=REFUSALS,
    openapi_extra=BEARER | documented(BATCH),
)
async def lease_jobs(request: Request) -> JSON:
    """The job poll: reaps this endpoint's lapsed leases when one may be due, then leases up
    to `batch` due scans, oldest first."""
    rt, worker = presented(request)
    jobs = await rt.store.leasing.lease(worker, BATCH.value(request))
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


@router.post(
    "/results",
    response_model=BatchStatuses,
    responses=REFUSALS,
    openapi_extra=BEARER | body_doc(BatchResults) | documented(NEXT),
)
async def report_results(request: Request) -> JSON:
    """Up to 100 independent results; each item gets the status the single route would give.
    With `next`, also the worker's next jobs."""
    rt, worker = presented(request)
    fetch = NEXT.read(request)
    body = await json_body(request, BatchResults)
    statuses: list[dict[str, Any] | None] = []
    valid: list[tuple[int, Report]] = []
    for item in body.results:
        try:
            valid.append((item.scan_id, _report(item)))
            statuses.append(None)
        except Invalid as exc:
            statuses.append(shapes.item_status(ItemOutcome(item.scan_id, None, exc)))
    done = await rt.store.results.complete(worker, valid, fetch=fetch or 0)
    applied = iter(done.outcomes)
    reply: dict[str, Any] = {"results": [s or shapes.item_status(next(applied)) for s in statuses]}
    if fetch is not None:
        reply["next"] = [shapes.job(job) for job in done.jobs]
    return JSON(reply)


@router.post(
    "/{scan_id}/result",
    response_model=ResultPublic,
    responses=REFUSALS,
    openapi_extra=BEARER | body_doc(ResultBody) | documented(SCAN_ID, NEXT),
)
async def report_result(request: Request) -> JSON:
    """Close the current attempt. Stale results are refused with 409 and change nothing; the
    same result sent again is answered as the first time. With `next`, also the worker's next
    jobs, leased in the same transaction."""
    rt, worker = presented(request)
    scan_id, fetch = SCAN_ID.value(request), NEXT.read(request)
    body = await json_body(request, ResultBody)
    done = await rt.store.results.complete(worker, [(scan_id, _report(body))], fetch=fetch or 0)
    [outcome] = done.outcomes
    if outcome.error is not None:
        raise outcome.error
    assert outcome.closed is not None
    reply = shapes.closed(outcome.closed)
    if fetch is not None:
        reply["next"] = [shapes.job(job) for job in done.jobs]
    return JSON(reply)


def _echo(body: Echo) -> tuple[int | None, str | None]:
    try:
        require_echo_pair(body.attempt, body.assignment_id)
    except EchoError as exc:
        raise Invalid(f"body.{exc.missing}", str(exc)) from None
    return body.attempt, body.assignment_id


@router.post(
    "/{scan_id}/heartbeat",
    response_model=LeaseDeadline,
    responses=REFUSALS,
    openapi_extra=BEARER | body_doc(Echo) | documented(SCAN_ID),
)
async def heartbeat(request: Request) -> JSON:
    """Extend the lease of the current assignment by the job timeout."""
    rt, worker = presented(request)
    scan_id = SCAN_ID.value(request)
    attempt, assignment = _echo(await json_body(request, Echo))
    until = await rt.store.assignments.heartbeat(
        worker, scan_id, attempt=attempt, assignment_id=assignment
    )
    return JSON(shapes.deadline(scan_id, until))


@router.post(
    "/{scan_id}/wait",
    response_model=LeaseDeadline,
    responses=REFUSALS,
    openapi_extra=BEARER | body_doc(WaitBody) | documented(SCAN_ID),
)
async def wait(request: Request) -> JSON:
    """Park the scan while it waits on something outside, for at most `seconds`."""
    rt, worker = presented(request)
    scan_id = SCAN_ID.value(request)
    body = await json_body(request, WaitBody)
    attempt, assignment = _echo(body)
    if body.seconds > rt.settings.max_wait_seconds:
        raise Invalid(
            "body.seconds", f"a wait lasts at most {rt.settings.max_wait_seconds} seconds"
        )
    until = await rt.store.assignments.wait(
        worker,
        scan_id,
        attempt=attempt,
        assignment_id=assignment,
        seconds=body.seconds,
        reason=body.reason,
    )
    return JSON(shapes.deadline(scan_id, until))


@router.post(
    "/{scan_id}/resume",
    response_model=LeaseDeadline,
    responses=REFUSALS,
    openapi_extra=BEARER | body_doc(Echo) | documented(SCAN_ID),
)
async def resume(request: Request) -> JSON:
    """End a wait; the scan is back under an ordinary lease."""
    rt, worker = presented(request)
    scan_id = SCAN_ID.value(request)
    attempt, assignment = _echo(await json_body(request, Echo))
    until = await rt.store.assignments.resume(
        worker, scan_id, attempt=attempt, assignment_id=assignment
    )
    return JSON(shapes.deadline(scan_id, until))
