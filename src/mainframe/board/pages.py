"""The board's pages: sign-in, the scans with their pills and filters, one scan (a dead
letter's page), the redrive confirmation, an endpoint with its credentials, and the owner's
audit trail."""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from starlette.responses import HTMLResponse, Response

from mainframe.api import operator_shapes, shapes
from mainframe.api.deps import RuntimeDep
from mainframe.board import filters
from mainframe.board.auth import (
    SIGN_IN_COOKIE,
    current_session,
    new_sign_in_token,
    set_cookie,
)
from mainframe.board.render import page
from mainframe.store import NotFound
from mainframe.store.overview import Overview
from mainframe.store.sessions import Session

router = APIRouter(prefix="/board", include_in_schema=False)
IdPath = Annotated[int, Path(ge=1, le=2**62)]  # within the database's 64 bits
SIGN_IN_FORM_SECONDS = 3600  # how long a sign-in form stays usable
# An audit page's cursor: an audit row's id, ASCII digits within the database's 64 bits.
AUDIT_CURSOR = re.compile(r"[0-9]{1,18}")


@router.get("/sign-in")
async def sign_in_form(request: Request) -> Response:
    token = new_sign_in_token()
    response = page(request, "sign_in.html", {"csrf": token, "error": None})
    set_cookie(request, response, SIGN_IN_COOKIE, token, SIGN_IN_FORM_SECONDS)
    return response


def pill_counts(view: Overview, endpoint: str | None) -> dict[str, int]:
    """Each pill's count over the owner's endpoints (or the one chosen)."""
    cards = [c for c in view.endpoints if endpoint is None or c.name == endpoint]
    counts = {key: sum(c.counts[key] for c in cards) for key in filters.PILLS if key != "all"}
    counts["all"] = sum(counts.values()) + sum(c.counts["quarantined"] for c in cards)
    return counts


async def _rows(rt: RuntimeDep, session: Session, f: filters.BoardFilter) -> dict[str, Any]:
    if f.pill == "dead":
        found = await rt.store.dead_letters.page(
            session.owner_id, f.dead_letters(), after=operator_shapes.parse_cursor(f.cursor),
            limit=filters.PAGE_SIZE,
        )  # fmt: skip
        return {
            "rows": [operator_shapes.dead_letter(item) for item in found.items],
            "next_cursor": operator_shapes.cursor(found.next_cursor),
            "matched": found.count,
        }
    before = None if f.cursor is None or not f.cursor.isdigit() else int(f.cursor)
    scans = await rt.store.listings.list_scans(
        session.owner_id, status=filters.PILLS[f.pill], queue=f.queue, endpoint=f.endpoint,
        before_id=before, limit=filters.PAGE_SIZE, q=f.q, plain_failures_only=f.pill == "failed",
    )  # fmt: skip
    full = len(scans) == filters.PAGE_SIZE
    return {
        "rows": [shapes.scan(s) for s in scans],
        "next_cursor": str(scans[-1].id) if full else None,
        "matched": None,
    }


@router.get("")
async def board(request: Request, rt: RuntimeDep) -> Response:
    session = await current_session(request, rt)
    try:
        f = filters.parse(request.query_params)
        if f.cursor is not None and f.pill == "dead":
            operator_shapes.parse_cursor(f.cursor)
    except (filters.BadFilter, ValueError) as exc:
        field = getattr(exc, "field", "cursor")
        return _error(request, session, 422, f"The filter field {field!r} is not usable: {exc}")
    view = await rt.store.listings.overview(session.owner_id)
    context = {
        "session": session, "f": f, "pills": filters.PILLS, "reasons": filters.REASONS,
        "counts": pill_counts(view, f.endpoint), "overview": operator_shapes.overview(view),
        "endpoints": [c.name for c in view.endpoints], "notice": request.query_params.get("notice"),
        **(await _rows(rt, session, f)),
    }  # fmt: skip
    return page(request, "board.html", context)


@router.get("/scans/{scan_id}")
async def scan_page(request: Request, rt: RuntimeDep, scan_id: IdPath) -> Response:
    session = await current_session(request, rt)
    try:
        scan = await rt.store.dead_letters.get(session.owner_id, scan_id)
    except NotFound:
        return _error(request, session, 404, f"There is no scan {scan_id} on your endpoints.")
    body = shapes.scan(scan, with_attempts=True)
    body["redrive_count"], body["redriven_at"] = scan.redrive_count, scan.redriven_at
    context = {"session": session, "scan": body, "notice": request.query_params.get("notice")}
    return page(request, "scan.html", context)


@router.get("/redrive")
async def confirm_redrive(request: Request, rt: RuntimeDep) -> Response:
    session = await current_session(request, rt)
    try:
        f = filters.parse(request.query_params)
    except filters.BadFilter as exc:
        return _error(request, session, 422, f"The filter field {exc.field!r} is not usable.")
    count = await rt.store.dead_letters.count(session.owner_id, f.dead_letters())
    return page(request, "confirm.html", {"session": session, "f": f, "count": count})


@router.get("/endpoints/{name}")
async def endpoint_page(request: Request, rt: RuntimeDep, name: str) -> Response:
    session = await current_session(request, rt)
    view = await rt.store.listings.overview(session.owner_id)
    cards = [c for c in view.endpoints if c.name == name and filters.printable(name)]
    if not cards:
        return _error(request, session, 404, "There is no such endpoint of yours.")
    tokens = await rt.store.credentials.tokens(session.owner_id, name)
    context = {
        "session": session, "card": operator_shapes.card(cards[0], view.taken_at),
        "tokens": tokens, "secret": None, "notice": request.query_params.get("notice"),
    }  # fmt: skip
    return page(request, "endpoint.html", context)


@router.get("/audit")
async def audit_page(request: Request, rt: RuntimeDep) -> Response:
    session = await current_session(request, rt)
    cursor = request.query_params.get("cursor") or None
    if cursor is not None and not AUDIT_CURSOR.fullmatch(cursor):
        return _error(request, session, 422, "Use the Older link's cursor.")
    found = await rt.store.dead_letters.audit(
        session.owner_id, before_id=None if cursor is None else int(cursor),
        limit=filters.PAGE_SIZE,
    )  # fmt: skip
    # The API's entries exactly, beside each one's stored time for the board's one format.
    entries = [(e.at, operator_shapes.audit_entry(e, session.owner)) for e in found]
    full = len(found) == filters.PAGE_SIZE
    context = {"session": session, "entries": entries,
               "next_cursor": str(found[-1].id) if full else None}  # fmt: skip
    return page(request, "audit.html", context)


def _error(request: Request, session: Session | None, status: int, message: str) -> HTMLResponse:
    return page(request, "error.html", {"session": session, "message": message}, status=status)
