"""The routes a dragonfly worker calls under `/dragonfly`: the handshake, the rules, the job
poll and the result. Each reads what it needs from the request, calls the store as Mainframe's
own routes do (so the same leases, closes, events, dead letters, metrics, logs and hooks
follow) and answers with its reply's model. Refusals are the store's errors, answered by
the app's one error body. The routes are not in Mainframe's OpenAPI document: their contract
is the worker's (docs/dragonfly.md)."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

from fastapi import APIRouter, Query
from starlette.requests import Request
from starlette.responses import Response

from mainframe.contract.dragonfly_schemas import DragonflyJob, RulesPublic, SessionPublic
from mainframe.contract.limits import MAX_LEASE_BATCH
from mainframe.contract.schemas import AsciiInt, ResultPublic
from mainframe.dragonfly import replies
from mainframe.dragonfly.reports import read_report
from mainframe.dragonfly.session import COOKIE
from mainframe.dragonfly.surface import surface_of
from mainframe.web import BearerDep

PREFIX = "/dragonfly"
router = APIRouter(prefix=PREFIX, include_in_schema=False)
# Scans leased at most per poll, as the job poll of /api/v1 allows.
BatchQuery = Annotated[int, Query(ge=1, le=MAX_LEASE_BATCH), AsciiInt]


def session_cookie(token: str, *, path: str, secure: bool) -> str:
    """The Set-Cookie value of a session: sent back on every route below the handshake's
    path, never readable by scripts, and marked Secure only where it travels over https (a
    worker's cookie jar would not send a Secure cookie over plain http)."""
    return f"{COOKIE}={token}; Path={path}; HttpOnly" + ("; Secure" if secure else "")


@router.get("")
async def handshake(request: Request, response: Response) -> SessionPublic:
    """Cloudflare Access's part: a worker token's name and secret in, a session cookie out."""
    headers = request.headers
    session, token = await surface_of(request).handshake(
        headers.get("cf-access-client-id"), headers.get("cf-access-client-secret")
    )
    path = request.url.path.rstrip("/") or PREFIX
    response.headers.append(
        "set-cookie", session_cookie(token, path=path, secure=request.url.scheme == "https")
    )
    return replies.session(session)


@router.get("/rules")
async def rules(request: Request, bearer: BearerDep) -> RulesPublic:
    """Every rule by name, and the hash the jobs carry."""
    surface = surface_of(request)
    await surface.store.authentication.worker(surface.presented(request, bearer))
    return replies.rule_set(surface.rules.current())


@router.post("/jobs")
async def lease_jobs(
    request: Request, bearer: BearerDep, batch: BatchQuery = 1
) -> list[DragonflyJob]:
    """The job poll: up to `batch` due scans of the worker's endpoint, leased as by /api/v1."""
    surface = surface_of(request)
    leased = await surface.store.leasing.lease(surface.presented(request, bearer), batch)
    rules_hash = surface.rules.current().hash
    return [replies.job(job, rules_hash) for job in leased]


@router.put("/package")
async def report_package(request: Request, bearer: BearerDep) -> ResultPublic:
    """A result for (name, version): it closes the attempt of the scan leased to this worker,
    through the same close as /api/v1's result route. Its body is read as the worker sends
    it, whatever its content type (`reports.py`)."""
    surface = surface_of(request)
    caller = surface.presented(request, bearer)
    keyed = read_report(await request.body())
    report = keyed.report
    found = await surface.store.packages.resolve(
        caller,
        name=keyed.name,
        version=keyed.version,
        assignment_id=report.assignment_id,
    )
    if report.assignment_id is None and surface.settings.dragonfly_legacy_results == "lease_holder":
        lease = await surface.store.packages.sole_holder_lease(found)
        if lease is not None:
            # Compared and set by the close like an echoed pair: a lease that moved on since
            # this read makes the result stale, never another attempt's.
            report = replace(report, attempt=lease.attempt, assignment_id=lease.assignment_id)
    done = await surface.store.results.complete(caller, [(found.scan_id, report)])
    [outcome] = done.outcomes
    if outcome.error is not None:
        raise outcome.error
    assert outcome.closed is not None
    return ResultPublic.of(outcome.closed)
