"""Intake (sources, owners, open intake) and the owner's scan routes."""

from __future__ import annotations

from typing import Annotated

import orjson
from fastapi import APIRouter, Path, Query

from mainframe.api import shapes
from mainframe.api.deps import OptionalPrincipalDep, OwnerDep, RuntimeDep, owner_id
from mainframe.api.jobs import REFUSALS
from mainframe.api.responses import JSON
from mainframe.api.schemas import MAX_PAYLOAD_BYTES, FailBody, ScanCreate, ScanPage, ScanPublic
from mainframe.lifecycle.rules import Status
from mainframe.store import Invalid, Unauthorized

router = APIRouter(prefix="/api/v1", tags=["scans"])
ScanIdPath = Annotated[int, Path(ge=1, le=2**62, description="The scan's id.")]


@router.post(
    "/scans",
    status_code=201,
    response_model=ScanPublic,
    responses={
        200: {"model": ScanPublic, "description": "the live scan with that key"},
        **REFUSALS,
    },
)
async def submit_scan(rt: RuntimeDep, who: OptionalPrincipalDep, body: ScanCreate) -> JSON:
    """Submit a scan: 201 when created, 200 with the live scan of the same key."""
    if who is not None and who.role == "worker":
        raise Unauthorized("workers cannot submit scans; use a source or owner token")
    payload = None if body.payload is None else orjson.dumps(body.payload).decode()
    if payload is not None and len(payload) > MAX_PAYLOAD_BYTES:
        raise Invalid("body.payload", f"payload JSON is limited to {MAX_PAYLOAD_BYTES} bytes")
    scan, created = await rt.run(
        rt.store.submit,
        who,
        endpoint=body.endpoint,
        queue=body.queue,
        name=body.name,
        version=body.version,
        kind=body.kind,
        payload=payload,
    )
    return JSON(shapes.scan(scan), status_code=201 if created else 200)


@router.get("/scans/{scan_id}", response_model=ScanPublic, responses=REFUSALS)
async def get_scan(rt: RuntimeDep, owner: OwnerDep, scan_id: ScanIdPath) -> JSON:
    """One scan with its attempt history."""
    scan = await rt.run(rt.store.get_scan, owner_id(owner), scan_id)
    return JSON(shapes.scan(scan, with_attempts=True))


def _cursor(cursor: str | None) -> int | None:
    if cursor is None:
        return None
    if not cursor.isdigit() or len(cursor) > 18:
        raise Invalid("query.cursor", "use the next_cursor of a previous page")
    return int(cursor)


@router.get("/scans", response_model=ScanPage, responses=REFUSALS)
async def list_scans(
    rt: RuntimeDep,
    owner: OwnerDep,
    status: Status | None = None,
    queue: Annotated[str | None, Query(max_length=100)] = None,
    endpoint: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=32)] = None,
) -> JSON:
    """Scans across the owner's endpoints, newest first, keyset-paged by `next_cursor`."""
    rows = await rt.run(
        rt.store.list_scans,
        owner_id(owner),
        status=status,
        queue=queue,
        endpoint=endpoint,
        before_id=_cursor(cursor),
        limit=limit,
    )
    next_cursor = str(rows[-1].id) if len(rows) == limit else None
    return JSON({"scans": [shapes.scan(row) for row in rows], "next_cursor": next_cursor})


@router.get("/dead-letters", response_model=ScanPage, responses=REFUSALS)
async def list_dead_letters(
    rt: RuntimeDep,
    owner: OwnerDep,
    queue: Annotated[str | None, Query(max_length=100)] = None,
    endpoint: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=32)] = None,
) -> JSON:
    """Dead letters across every endpoint the owner has, revocation cascades included, newest
    first: scans in FAILED that will never be retried."""
    rows = await rt.run(
        rt.store.list_scans,
        owner_id(owner),
        status=Status.FAILED,
        queue=queue,
        endpoint=endpoint,
        before_id=_cursor(cursor),
        limit=limit,
        dead_letters_only=True,
    )
    next_cursor = str(rows[-1].id) if len(rows) == limit else None
    return JSON({"scans": [shapes.scan(row) for row in rows], "next_cursor": next_cursor})


@router.post("/scans/{scan_id}/fail", response_model=ScanPublic, responses=REFUSALS)
async def fail_scan(
    rt: RuntimeDep, owner: OwnerDep, scan_id: ScanIdPath, body: FailBody | None = None
) -> JSON:
    """Fail the current attempt the way its worker would (dead letter at the cap)."""
    body = body or FailBody()
    scan = await rt.run(
        rt.store.operator_fail,
        owner_id(owner),
        scan_id,
        retryable=body.retryable,
        summary=body.summary,
    )
    return JSON(shapes.scan(scan))


@router.post("/quarantine/{scan_id}/release", response_model=ScanPublic, responses=REFUSALS)
async def release(rt: RuntimeDep, owner: OwnerDep, scan_id: ScanIdPath) -> JSON:
    """Let a quarantined (unauthenticated) submission into the queue."""
    scan = await rt.run(rt.store.release, owner_id(owner), scan_id)
    return JSON(shapes.scan(scan))


@router.post("/endpoints/{name}/revoke", responses=REFUSALS)
async def revoke(
    rt: RuntimeDep, owner: OwnerDep, name: Annotated[str, Path(max_length=200)]
) -> JSON:
    """Revoke an endpoint: its credentials stop working and its live scans are dead-lettered
    in one transaction, announced to nobody."""
    count = await rt.run(rt.store.revoke, owner_id(owner), name)
    rt.forget_endpoint(name)
    return JSON({"endpoint": name, "revoked": True, "dead_lettered": count})
