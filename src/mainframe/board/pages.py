"""The board's pages: sign-in, the scans with their pills and filters, one scan (a dead
letter's page with its timeline), the confirmations of a redrive, and the owner's audit
trail. Every page reads the session's flash, so what a form's redirect wanted to say is shown
once."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from starlette.responses import HTMLResponse, Response

from mainframe.board import filters, timeline
from mainframe.board.auth import (
    SIGN_IN_COOKIE,
    new_sign_in_token,
    safe_next,
    session_ended,
    set_cookie,
    signed_in_page,
)
from mainframe.board.charts import activity, sparkline
from mainframe.board.render import page
from mainframe.contract.limits import MAX_ID
from mainframe.contract.vocabulary import REQUEUED_IDS_KEPT, Action
from mainframe.shapes import operator as operator_shapes
from mainframe.shapes import scans as shapes
from mainframe.store import HOUR_US, MINUTE_US, AuditEntry, Invalid, NotFound, Overview, Session
from mainframe.web import RuntimeDep

router = APIRouter(prefix="/board", include_in_schema=False)
IdPath = Annotated[int, Path(ge=1, le=MAX_ID)]  # within the database's 64 bits
SIGN_IN_FORM_SECONDS = 3600  # how long a sign-in form stays usable
# A pill's count under a search or a queue walks the listing as a page of it does, so it is
# counted up to this many scans and no further, and a pill past it says "more than 1000" in
# words: an exact count there would read the whole history, more than a page may cost.
COUNT_CAP = 1000
SPARK_WHAT = "dead letters per hour over the last 24 hours"
DAY = "Scans per hour over the last 24 hours"
HOUR = "Scans per minute over the last hour"
ENDED = "Your session ended; sign in again to continue."
# An audit page's cursor: an audit row's id, ASCII digits within the database's 64 bits.
AUDIT_CURSOR = re.compile(r"[0-9]{1,18}")


def sign_in_page(
    request: Request, *, next_path: str, error: str | None, reason: str | None, status: int
) -> Response:
    """The sign-in form with a fresh CSRF cookie, returning to `next_path` once signed in."""
    token = new_sign_in_token()
    context = {"csrf": token, "error": error, "reason": reason, "next": next_path}
    response = page(request, "sign_in.html", context, status=status)
    set_cookie(request, response, SIGN_IN_COOKIE, token, SIGN_IN_FORM_SECONDS)
    return response


@router.get("/sign-in")
async def sign_in_form(request: Request, rt: RuntimeDep) -> Response:
    # Why the operator is here comes from the server's own state (an expired session behind
    # the cookie), never from the URL; the URL only says where to return to.
    reason = ENDED if await session_ended(request, rt) else None
    next_path = safe_next(request.query_params.get("next"))
    return sign_in_page(request, next_path=next_path, error=None, reason=reason, status=200)


def overview_counts(view: Overview, endpoint: str | None) -> dict[str, int]:
    """Each pill's count over the owner's endpoints (or the one chosen)."""
    cards = [c for c in view.endpoints if endpoint is None or c.name == endpoint]
    counts = {key: sum(c.counts[key] for c in cards) for key in filters.PILLS if key != "all"}
    counts["all"] = sum(counts.values()) + sum(c.counts["quarantined"] for c in cards)
    return counts


async def pill_counts(
    rt: RuntimeDep, session: Session, view: Overview, f: filters.BoardFilter
) -> tuple[dict[str, int], set[str]]:
    """Each pill's count under the active filter (what its link would list), and the pills
    holding more than COUNT_CAP scans, which were not counted further."""
    past_cap: set[str] = set()
    if f.narrows:
        keys = [key for key in filters.PILLS if key != "dead"]
        # One past the cap, so "more than COUNT_CAP" is known, not guessed from a full count.
        found = await rt.store.listings.count_scans(
            session.owner_id, [f.listing(key) for key in keys], cap=COUNT_CAP + 1
        )
        counts = dict(zip(keys, found, strict=True))
        past_cap = {key for key, n in counts.items() if n > COUNT_CAP}
    else:
        counts = overview_counts(view, f.endpoint)
    counts["dead"] = await rt.store.dead_letters.count(session.owner_id, f.dead_letters())
    return counts, past_cap


async def _rows(rt: RuntimeDep, session: Session, f: filters.BoardFilter) -> dict[str, Any]:
    if f.pill == "dead":
        found = await rt.store.dead_letters.page(
            session.owner_id, f.dead_letters(), after=filters.dead_keyset(f.cursor),
            newer_than=filters.dead_keyset(f.newer), limit=filters.PAGE_SIZE,
        )  # fmt: skip
        return {
            "rows": [operator_shapes.dead_letter(item) for item in found.items],
            "older": operator_shapes.cursor(found.next_cursor),
            "newer": operator_shapes.cursor(found.newer_cursor),
            "matched": found.count,
            "redrivable": found.redrivable,
        }
    scans = await rt.store.listings.scan_page(
        session.owner_id, f.listing(), before_id=filters.scan_keyset(f.cursor),
        newer_than=filters.scan_keyset(f.newer), limit=filters.PAGE_SIZE,
    )  # fmt: skip
    return {
        "rows": [shapes.scan(s) for s in scans.items],
        "older": None if scans.older_than is None else str(scans.older_than),
        "newer": None if scans.newer_than is None else str(scans.newer_than),
        "matched": None,
        "redrivable": None,
    }


@router.get("")
async def board(request: Request, rt: RuntimeDep) -> Response:
    session, context = await signed_in_page(request, rt)
    try:
        f = filters.parse(request.query_params)
    except filters.BadFilter as exc:
        message = f"The filter field {exc.field!r} is not usable: {exc}."
        return error_page(request, context, 422, message)
    view = await rt.store.listings.overview(session.owner_id)
    counts, past_cap = await pill_counts(rt, session, view, f)
    context |= await _charts(rt, session)
    context |= {
        "f": f, "pills": filters.PILLS, "titles": filters.TITLES, "reasons": filters.REASONS,
        "counts": counts, "past_cap": past_cap, "count_cap": COUNT_CAP,
        "overview": operator_shapes.overview(view),
        "endpoints": [c.name for c in view.endpoints], **(await _rows(rt, session, f)),
        "cause_pattern": await rt.store.causes.pattern(f.cause) if f.cause else None,
    }  # fmt: skip
    return page(request, "board.html", context)


async def _charts(rt: RuntimeDep, session: Session) -> dict[str, Any]:
    """The front page's pictures of what the fleet did: per hour over the last day, per
    minute over the last hour (store/operator/activity.py, counted as it happened)."""
    hours = await rt.store.activity.chart(session.owner_id, span="hour", bars=24)
    minutes = await rt.store.activity.chart(session.owner_id, span="minute", bars=60)
    return {
        "day_chart": activity(hours, what=DAY, unit="scans per hour", tick_every=6 * HOUR_US),
        "hour_chart": activity(
            minutes, what=HOUR, unit="scans per minute", tick_every=15 * MINUTE_US
        ),
        "day_bars": hours,
        "hour_bars": minutes,
    }


def _came_from(request: Request, dead: bool) -> filters.BoardFilter:
    """The listing a scan's page was opened from (its link carries the filter and page), so
    the way back keeps the search; a bare link goes back to the scan's pill."""
    if not request.query_params:
        return filters.BoardFilter("dead" if dead else "all")
    return filters.lenient(request.query_params)


@router.get("/scans/{scan_id}")
async def scan_page(request: Request, rt: RuntimeDep, scan_id: IdPath) -> Response:
    session, context = await signed_in_page(request, rt)
    try:
        scan = await rt.store.dead_letters.get(session.owner_id, scan_id)
    except NotFound:
        return error_page(request, context, 404, f"There is no scan {scan_id} on your endpoints.")
    body = shapes.scan(scan, with_attempts=True).model_dump()
    body["redrive_count"], body["redriven_at"] = scan.redrive_count, scan.redriven_at
    cause = (await rt.store.causes.of_scans(session.owner_id, [scan_id])).get(scan_id)
    context |= {
        "scan": body, "payload": scan.payload, "timeline": timeline.entries(scan),
        "f": _came_from(request, scan.dead_lettered_at is not None),
        "budget": rt.settings.max_job_attempts, "cause": operator_shapes.cause_name(cause),
    }  # fmt: skip
    return page(request, "scan.html", context)


@router.get("/scans/{scan_id}/redrive")
async def confirm_redrive_one(request: Request, rt: RuntimeDep, scan_id: IdPath) -> Response:
    session, context = await signed_in_page(request, rt)
    try:
        scan = await rt.store.dead_letters.get(session.owner_id, scan_id)
    except NotFound:
        return error_page(request, context, 404, f"There is no scan {scan_id} on your endpoints.")
    if scan.dead_lettered_at is None:
        message = f"Scan #{scan_id} is not a dead letter ({scan.status.value}): nothing to redrive."
        return error_page(request, context, 409, message)
    context |= {"scan": shapes.scan(scan), "f": _came_from(request, True)}
    return page(request, "confirm_one.html", context)


@router.get("/redrive")
async def confirm_redrive(request: Request, rt: RuntimeDep) -> Response:
    session, context = await signed_in_page(request, rt)
    try:
        f = filters.parse(request.query_params)
    except filters.BadFilter as exc:
        return error_page(request, context, 422, f"The filter field {exc.field!r} is not usable.")
    count = await rt.store.dead_letters.redrivable(session.owner_id, f.dead_letters())
    dead = replace(f, pill="dead", cursor=None, newer=None)
    pattern = await rt.store.causes.pattern(f.cause) if f.cause else None
    return page(request, "confirm.html", context | {"f": dead, "count": count, "pattern": pattern})


@router.get("/causes")
async def causes_page(request: Request, rt: RuntimeDep) -> Response:
    """The Dead tab's Causes view: dead letters grouped by what killed them, over the owner's
    endpoints or the one chosen."""
    session, context = await signed_in_page(request, rt)
    try:
        after = operator_shapes.parse_cause_cursor(request.query_params.get("cursor") or None)
        f = filters.parse({"status": "dead", "endpoint": request.query_params.get("endpoint", "")})
    except Invalid:
        return error_page(request, context, 422, "Use the Older link's cursor.")
    except filters.BadFilter as exc:
        return error_page(request, context, 422, f"The filter field {exc.field!r} is not usable.")
    found = await rt.store.causes.page(
        session.owner_id, endpoint=f.endpoint, after=after, limit=filters.PAGE_SIZE
    )
    endpoints = sorted((await rt.store.owners.owned_endpoints(session.owner_id)).values())
    rows = [
        (operator_shapes.cause(item), sparkline(item.hours, what=SPARK_WHAT))
        for item in found.items
    ]
    context |= {
        "f": f, "rows": rows, "endpoints": endpoints,
        # Two endpoints' `default` queues are two places: name each facet's endpoint when
        # the view spans more than one.
        "qualified": f.endpoint is None and len(endpoints) > 1,
        "next_cursor": operator_shapes.cause_page(found).next_cursor,
    }  # fmt: skip
    return page(request, "causes.html", context)


@router.get("/audit")
async def audit_page(request: Request, rt: RuntimeDep) -> Response:
    session, context = await signed_in_page(request, rt)
    cursor = request.query_params.get("cursor") or None
    if cursor is not None and not AUDIT_CURSOR.fullmatch(cursor):
        return error_page(request, context, 422, "Use the Older link's cursor.")
    found = await rt.store.audit.entries(
        session.owner_id, before_id=None if cursor is None else int(cursor),
        limit=filters.PAGE_SIZE,
    )  # fmt: skip
    # The API's entries exactly, beside each one's stored time for the board's one format
    # and, for a redrive, the scans its line names, to link them.
    entries = [
        (e.at, operator_shapes.audit_entry(e, session.owner), _redrive_line(e)) for e in found
    ]
    full = len(found) == filters.PAGE_SIZE
    context |= {
        "entries": entries,
        "next_cursor": str(found[-1].id) if full else None,
        "ids_shown": operator_shapes.AUDIT_IDS_SHOWN,
        "ids_kept": REQUEUED_IDS_KEPT,
    }
    return page(request, "audit.html", context)


def _redrive_line(entry: AuditEntry) -> dict[str, Any] | None:
    """A redrive's audit line in parts: its headline, the scans it names, how many in all."""
    if entry.action != Action.REDRIVE:
        return None
    ids, total = operator_shapes.redrive_named(entry)
    return {"headline": operator_shapes.redrive_headline(entry), "ids": ids, "total": total}


def error_page(
    request: Request, context: dict[str, Any], status: int, message: str
) -> HTMLResponse:
    """The board's own page for a refusal, with the session's header when there is one."""
    return page(request, "error.html", context | {"message": message}, status=status)
