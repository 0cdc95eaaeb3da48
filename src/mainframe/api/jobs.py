"""Worker routes: the job poll, results (single and batch), heartbeats, waits, resumes. They
are hot routes (`api/hot.py`): each declared once by its signature."""

from __future__ import annotations

from mainframe.api.hot import HotRoutes, stored
from mainframe.contract.limits import JOBS_PATH, MAX_RESULT_BYTES
from mainframe.contract.schemas import (
    BatchResults,
    BatchStatuses,
    Echo,
    ItemStatus,
    JobPublic,
    LeaseDeadline,
    PollParams,
    ResultBody,
    ResultParams,
    ResultPublic,
    ResultsParams,
    ScanParams,
    WaitBody,
)
from mainframe.lifecycle.rules import EchoError, require_echo_pair
from mainframe.shapes import scans as shapes
from mainframe.store import Invalid, ItemOutcome, Presented, Report
from mainframe.wiring import Runtime

hot = HotRoutes(JOBS_PATH, "worker")


@hot.post("")
async def lease_jobs(rt: Runtime, token: Presented, params: PollParams) -> list[JobPublic]:
    """The job poll: reaps this endpoint's lapsed leases when one may be due, then leases up
    to `batch` due scans, oldest first."""
    return [shapes.job(job) for job in await rt.store.leasing.lease(token, params.batch)]


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


@hot.post("/{scan_id}/result")
async def report_result(
    rt: Runtime, token: Presented, params: ResultParams, body: ResultBody
) -> ResultPublic:
    """Close the current attempt. Stale results are refused with 409 and change nothing; the
    same result sent again is answered as the first time. With `next`, also the worker's next
    jobs, leased in the same transaction."""
    report = [(params.scan_id, _report(body))]
    done = await rt.store.results.complete(token, report, fetch=params.next or 0)
    [outcome] = done.outcomes
    if outcome.error is not None:
        raise outcome.error
    assert outcome.closed is not None
    return shapes.closed(outcome.closed, shapes.jobs(done.jobs, params.next))


@hot.post("/results")
async def report_results(
    rt: Runtime, token: Presented, params: ResultsParams, body: BatchResults
) -> BatchStatuses:
    """Up to 100 independent results; each item gets the status the single route would give.
    With `next`, also the worker's next jobs."""
    statuses: list[ItemStatus | None] = []
    valid: list[tuple[int, Report]] = []
    for item in body.results:
        try:
            valid.append((item.scan_id, _report(item)))
            statuses.append(None)
        except Invalid as exc:
            statuses.append(shapes.item_status(ItemOutcome(item.scan_id, None, exc)))
    done = await rt.store.results.complete(token, valid, fetch=params.next or 0)
    applied = iter(done.outcomes)
    return BatchStatuses(
        results=[status or shapes.item_status(next(applied)) for status in statuses],
        next=shapes.jobs(done.jobs, params.next),
    )


def _echo(body: Echo) -> tuple[int | None, str | None]:
    try:
        require_echo_pair(body.attempt, body.assignment_id)
    except EchoError as exc:
        raise Invalid(f"body.{exc.missing}", str(exc)) from None
    return body.attempt, body.assignment_id


@hot.post("/{scan_id}/heartbeat")
async def heartbeat(rt: Runtime, token: Presented, params: ScanParams, body: Echo) -> LeaseDeadline:
    """Extend the lease of the current assignment by the job timeout."""
    attempt, assignment = _echo(body)
    until = await rt.store.assignments.heartbeat(
        token, params.scan_id, attempt=attempt, assignment_id=assignment
    )
    return shapes.deadline(params.scan_id, until)


@hot.post("/{scan_id}/wait")
async def wait(rt: Runtime, token: Presented, params: ScanParams, body: WaitBody) -> LeaseDeadline:
    """Park the scan while it waits on something outside, for at most `seconds`."""
    attempt, assignment = _echo(body)
    if body.seconds > rt.settings.max_wait_seconds:
        raise Invalid(
            "body.seconds", f"a wait lasts at most {rt.settings.max_wait_seconds} seconds"
        )
    until = await rt.store.assignments.wait(
        token,
        params.scan_id,
        attempt=attempt,
        assignment_id=assignment,
        seconds=body.seconds,
        reason=body.reason,
    )
    return shapes.deadline(params.scan_id, until)


@hot.post("/{scan_id}/resume")
async def resume(rt: Runtime, token: Presented, params: ScanParams, body: Echo) -> LeaseDeadline:
    """End a wait; the scan is back under an ordinary lease."""
    attempt, assignment = _echo(body)
    until = await rt.store.assignments.resume(
        token, params.scan_id, attempt=attempt, assignment_id=assignment
    )
    return shapes.deadline(params.scan_id, until)
