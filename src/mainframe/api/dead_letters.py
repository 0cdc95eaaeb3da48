"""The owner's dead-letter routes: list and count, redrive, the audit trail, the overview."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from mainframe.api.deps import OwnerDep, RuntimeDep, owner_id
from mainframe.api.responses import REFUSALS
from mainframe.clock import parse_rfc3339
from mainframe.contract.limits import MAX_QUERY_LENGTH
from mainframe.contract.operator_schemas import (
    CAUSE_KEY,
    PRINTABLE,
    RFC3339,
    AuditPage,
    CausePage,
    DeadLetterPage,
    OverviewPublic,
    RedriveBody,
    RedriveFilter,
    RedrivePublic,
)
from mainframe.lifecycle.rules import DeadLetterReason
from mainframe.shapes import operator as shape
from mainframe.store import API, DeadLetterFilter, Invalid

router = APIRouter(prefix="/api/v1", tags=["dead letters"])


def to_us(when: str | None, field: str) -> int | None:
    """Microseconds since the epoch of an RFC 3339 time (its form already checked)."""
    if when is None:
        return None
    parsed = parse_rfc3339(when)
    if parsed is None:  # the right shape, an impossible date (2026-02-30)
        raise Invalid(field, "not a valid date and time")
    return parsed


@router.get("/dead-letters", responses=REFUSALS)
async def list_dead_letters(
    rt: RuntimeDep,
    owner: OwnerDep,
    q: Annotated[
        str | None, Query(min_length=1, max_length=MAX_QUERY_LENGTH, pattern=PRINTABLE)
    ] = None,
    reason: DeadLetterReason | None = None,
    since: Annotated[
        str | None, Query(pattern=RFC3339, description="RFC 3339; dead-lettered then or later")
    ] = None,
    queue: Annotated[str | None, Query(max_length=100, pattern=PRINTABLE)] = None,
    endpoint: Annotated[str | None, Query(max_length=200, pattern=PRINTABLE)] = None,
    cause: Annotated[str | None, Query(pattern=CAUSE_KEY, description="A cause's key.")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=40)] = None,
) -> DeadLetterPage:
    """Dead letters across every endpoint the owner has, revocation cascades included, newest
    first; `q` is a substring of the package name, source or kind, or an exact scan id;
    `cause` one cause of `GET /api/v1/dead-letters/causes`."""
    f = DeadLetterFilter(q, reason.value if reason else None, to_us(since, "query.since"),
                         endpoint, queue, cause)  # fmt: skip
    found = await rt.store.dead_letters.page(
        owner_id(owner), f, after=shape.parse_cursor(cursor), limit=limit
    )
    return shape.dead_letter_page(found)


def filter_of(body: RedriveFilter) -> DeadLetterFilter:
    return DeadLetterFilter(
        body.q,
        body.reason.value if body.reason else None,
        to_us(body.since, "body.filter.since"),
        body.endpoint,
        body.queue,
        body.cause,
    )


@router.get("/dead-letters/causes", responses=REFUSALS)
async def list_causes(
    rt: RuntimeDep,
    owner: OwnerDep,
    endpoint: Annotated[str | None, Query(max_length=200, pattern=PRINTABLE)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=40)] = None,
) -> CausePage:
    """The owner's dead letters grouped by cause (the fingerprint of the final failure's
    meaningful line), newest last seen first: each with its pattern, how many dead letters it
    holds now, when it was first and last seen, the queues, kinds and workers it hit, an
    example, and its dead letters per hour over the last day."""
    found = await rt.store.causes.page(
        owner_id(owner), endpoint=endpoint, after=shape.parse_cause_cursor(cursor), limit=limit
    )
    return shape.cause_page(found)


@router.post("/dead-letters/redrive", responses=REFUSALS)
async def redrive(rt: RuntimeDep, owner: OwnerDep, body: RedriveBody) -> RedrivePublic:
    """Put dead letters back in the queue with a fresh attempt budget, by ids (at most 1,000)
    or by filter; a filter redrive is refused with 409 `count_changed` unless `confirm` is
    the number it matches now."""
    role = rt.store.dead_letters
    if body.scan_ids is not None:
        done = await role.redrive_ids(owner_id(owner), body.scan_ids, origin=API)
    else:
        assert body.filter is not None and body.confirm is not None
        done = await role.redrive_filter(
            owner_id(owner), filter_of(body.filter), confirm=body.confirm, origin=API
        )
    return shape.redrive(done)


@router.get("/audit", responses=REFUSALS)
async def list_audit(
    rt: RuntimeDep,
    owner: OwnerDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=18, pattern=r"^[0-9]+$")] = None,
) -> AuditPage:
    """What the owner did, newest first, paged by `next_cursor`: redrives, endpoints created
    and revoked, credentials created and deleted, hooks created, enabled, rotated and deleted,
    and board sign-ins; each with when, the target, and where it came from (board, api, cli)."""
    entries = await rt.store.audit.entries(
        owner_id(owner), before_id=None if cursor is None else int(cursor), limit=limit
    )
    return shape.audit_page(entries, owner.name, full=len(entries) == limit)


@router.get("/overview", responses=REFUSALS)
async def overview(rt: RuntimeDep, owner: OwnerDep) -> OverviewPublic:
    """Per endpoint: scans by status (`dead` is the dead-letter listing's unfiltered count),
    the oldest due scan, hook health; and the totals across the owner's endpoints."""
    return shape.overview(await rt.store.listings.overview(owner_id(owner)))
