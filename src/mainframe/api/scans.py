"""Intake (sources, owners, open intake) and the owner's scan routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from pydantic import TypeAdapter, ValidationError

from mainframe.api.deps import OwnerDep, owner_id
from mainframe.api.hot import HotRoutes, stored
from mainframe.api.responses import REFUSALS, Reply
from mainframe.contract.limits import MAX_ID, MAX_PAYLOAD_BYTES
from mainframe.contract.operator_schemas import RevokedPublic
from mainframe.contract.schemas import (
    CURSOR_PATTERN,
    AsciiInt,
    BatchSubmitted,
    FailBody,
    ScanBatch,
    ScanCreate,
    ScanItem,
    ScanPage,
    ScanPublic,
    SubmitStatus,
)
from mainframe.lifecycle.rules import Status
from mainframe.shapes import operator as shape
from mainframe.shapes import scans as shapes
from mainframe.store import API, Invalid, Presented, ScanSpec
from mainframe.turns import in_turns
from mainframe.web import RuntimeDep
from mainframe.wiring import Runtime

router = APIRouter(prefix="/api/v1", tags=["scans"])
hot = HotRoutes("/api/v1", "scans")
ScanIdPath = Annotated[int, Path(ge=1, le=MAX_ID, description="The scan's id."), AsciiInt]


# Intake takes a token, or none at all on an open-intake endpoint (the scan is quarantined).
@hot.post("/scans", answers={201: "the scan, created", 200: "the live scan with that key"})
async def submit_scan(rt: Runtime, token: Presented | None, body: ScanCreate) -> ScanPublic | Reply:
    """Submit a scan: 201 when created, 200 with the live scan of the same key."""
    scan, created = await rt.store.intake.submit(token, endpoint=body.endpoint, spec=_spec(body))
    return shapes.scan(scan) if created else Reply(shapes.scan(scan), status_code=200)


@hot.post("/scans/batch", answers={200: "one status per item, in request order"})
async def submit_batch(rt: Runtime, token: Presented | None, body: ScanBatch) -> BatchSubmitted:
    """Submit up to 1,000 scans under one authorization; each item gets the status the single
    route would give it (201 created, 200 live key, 422 invalid), in request order."""
    statuses: list[SubmitStatus | None] = []
    specs: list[ScanSpec] = []
    async for index, raw in in_turns(enumerate(body.scans)):
        try:
            specs.append(_spec(_ITEM.validate_python(raw)))
            statuses.append(None)
        except ValidationError as exc:
            statuses.append(shapes.invalid_item(index, exc))
        except Invalid as exc:
            statuses.append(shapes.refused(exc))
    done = iter(await rt.store.intake.submit_many(token, endpoint=body.endpoint, specs=specs))
    results = [status or shapes.submitted(next(done)) async for status in in_turns(statuses)]
    return BatchSubmitted(results=results)


_ITEM: TypeAdapter[ScanItem] = TypeAdapter(ScanItem)


def _spec(body: ScanItem) -> ScanSpec:
    payload = stored(body.payload, field="body.payload", limit=MAX_PAYLOAD_BYTES)
    return ScanSpec(body.name, body.version, body.queue, body.kind, payload)


@router.get("/scans/{scan_id}", responses=REFUSALS)
async def get_scan(rt: RuntimeDep, owner: OwnerDep, scan_id: ScanIdPath) -> ScanPublic:
    """One scan with its attempt history."""
    scan = await rt.store.listings.get_scan(owner_id(owner), scan_id)
    return shapes.scan(scan, with_attempts=True)


def _cursor(cursor: str | None) -> int | None:
    if cursor is None:
        return None
    # ASCII digits only: str.isdigit() also admits '²' and '٣', which int() refuses or
    # silently reads as another number.
    if not (cursor.isascii() and cursor.isdigit()) or len(cursor) > 18:
        raise Invalid("query.cursor", "use the next_cursor of a previous page")
    return int(cursor)


@router.get("/scans", responses=REFUSALS)
async def list_scans(
    rt: RuntimeDep,
    owner: OwnerDep,
    status: Status | None = None,
    queue: Annotated[str | None, Query(max_length=100)] = None,
    endpoint: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=500), AsciiInt] = 50,
    cursor: Annotated[str | None, Query(pattern=CURSOR_PATTERN)] = None,
) -> ScanPage:
    """Scans across the owner's endpoints, newest first, keyset-paged by `next_cursor`."""
    rows = await rt.store.listings.list_scans(
        owner_id(owner),
        status=status,
        queue=queue,
        endpoint=endpoint,
        before_id=_cursor(cursor),
        limit=limit,
    )
    next_cursor = str(rows[-1].id) if len(rows) == limit else None
    return ScanPage(scans=[shapes.scan(row) for row in rows], next_cursor=next_cursor)


@router.post("/scans/{scan_id}/fail", responses=REFUSALS)
async def fail_scan(
    rt: RuntimeDep, owner: OwnerDep, scan_id: ScanIdPath, body: FailBody | None = None
) -> ScanPublic:
    """Fail the current attempt the way its worker would (dead letter at the cap)."""
    body = body or FailBody()
    scan = await rt.store.interventions.fail(
        owner_id(owner),
        scan_id,
        retryable=body.retryable,
        summary=body.summary,
    )
    return shapes.scan(scan)


@router.post("/quarantine/{scan_id}/release", responses=REFUSALS)
async def release(rt: RuntimeDep, owner: OwnerDep, scan_id: ScanIdPath) -> ScanPublic:
    """Let a quarantined (unauthenticated) submission into the queue."""
    scan = await rt.store.intake.release(owner_id(owner), scan_id)
    return shapes.scan(scan)


@router.post("/endpoints/{name}/revoke", responses=REFUSALS)
async def revoke(
    rt: RuntimeDep, owner: OwnerDep, name: Annotated[str, Path(max_length=200)]
) -> RevokedPublic:
    """Revoke an endpoint: its credentials stop working and its live scans are dead-lettered
    in one transaction, announced to nobody."""
    count = await rt.store.revocations.revoke(owner_id(owner), name, origin=API)
    return shape.revoked(name, count)
