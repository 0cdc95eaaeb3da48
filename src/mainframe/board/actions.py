"""The board's state-changing forms: sign in and out, redrive one scan or the current filter,
create an endpoint, issue and delete credentials. Each checks its CSRF token first, and each
change is audited as coming from the board."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Path, Request
from starlette.datastructures import FormData
from starlette.responses import RedirectResponse, Response

from mainframe.api.deps import RuntimeDep
from mainframe.api.operator_schemas import PRINTABLE
from mainframe.board import filters
from mainframe.board.auth import (
    SESSION_COOKIE,
    SIGN_IN_COOKIE,
    check_csrf,
    clear_cookie,
    current_session,
    new_sign_in_token,
    set_cookie,
)
from mainframe.board.pages import SIGN_IN_FORM_SECONDS
from mainframe.board.render import page
from mainframe.logs import get_logger
from mainframe.store import Conflict, StoreError
from mainframe.store.audit import BOARD
from mainframe.store.sessions import Session

router = APIRouter(prefix="/board", include_in_schema=False)
# Ids within the database's 64 bits; names without control characters (PostgreSQL refuses NUL).
IdPath = Annotated[int, Path(ge=1, le=2**62)]
NamePath = Annotated[str, Path(max_length=200, pattern=PRINTABLE)]
MAX_FORM_FIELDS = 20  # the largest form has eight fields


async def _form(request: Request) -> FormData:
    return await request.form(max_files=0, max_fields=MAX_FORM_FIELDS)


def _text(form: FormData, name: str, limit: int = 300) -> str:
    """A form field, trimmed and bounded; control characters (a NUL) are dropped."""
    value = form.get(name)
    if not isinstance(value, str):
        return ""
    return "".join(ch for ch in value.strip()[:limit] if filters.printable(ch))


def _see(path: str, **query: str | int) -> RedirectResponse:
    suffix = f"?{urlencode(query)}" if query else ""
    return RedirectResponse(path + suffix, status_code=303)


async def _signed_in(request: Request, rt: RuntimeDep) -> tuple[Session, FormData]:
    session = await current_session(request, rt)
    form = await _form(request)
    check_csrf(session.csrf, form.get("csrf"))
    return session, form


@router.post("/sign-in")
async def sign_in(request: Request, rt: RuntimeDep) -> Response:
    form = await _form(request)
    check_csrf(request.cookies.get(SIGN_IN_COOKIE), form.get("csrf"))
    lifetime = round(rt.settings.board_session_seconds * 1_000_000)
    made = await rt.store.sessions.sign_in(
        _text(form, "token", 200), lifetime_us=lifetime, origin=BOARD
    )
    if made is None:
        # Only logged: a refused token names no owner whose trail it could join.
        client = request.client.host if request.client else None
        get_logger().warning("board_sign_in_refused", client=client)
        token = new_sign_in_token()
        context = {"csrf": token, "error": "That is not an owner token."}
        response = page(request, "sign_in.html", context, status=401)
        set_cookie(request, response, SIGN_IN_COOKIE, token, SIGN_IN_FORM_SECONDS)
        return response
    secret, _session = made
    signed = _see("/board")
    set_cookie(request, signed, SESSION_COOKIE, secret, int(rt.settings.board_session_seconds))
    clear_cookie(request, signed, SIGN_IN_COOKIE)
    return signed


@router.post("/sign-out")
async def sign_out(request: Request, rt: RuntimeDep) -> Response:
    await _signed_in(request, rt)
    await rt.store.sessions.sign_out(request.cookies.get(SESSION_COOKIE, ""))
    response = _see("/board/sign-in")
    clear_cookie(request, response, SESSION_COOKIE)
    return response


@router.post("/scans/{scan_id}/redrive")
async def redrive_one(request: Request, rt: RuntimeDep, scan_id: IdPath) -> Response:
    session, _form_data = await _signed_in(request, rt)
    done = await rt.store.dead_letters.redrive_ids(session.owner_id, [scan_id], origin=BOARD)
    notice = "Redriven: back in the queue with a fresh attempt budget."
    if done.skipped:
        notice = f"Not redriven: {done.skipped[0].reason.replace('_', ' ')}."
    return _see(f"/board/scans/{scan_id}", notice=notice)


@router.post("/redrive")
async def redrive_filter(request: Request, rt: RuntimeDep) -> Response:
    session, form = await _signed_in(request, rt)
    try:
        f = filters.parse({k: _text(form, k) for k in ("q", "endpoint", "queue", "reason")})
        confirm = int(_text(form, "confirm", 12))
    except (filters.BadFilter, ValueError):
        return page(request, "error.html", {"session": session, "message": "Bad form."}, status=422)
    try:
        done = await rt.store.dead_letters.redrive_filter(
            session.owner_id, f.dead_letters(), confirm=confirm, origin=BOARD
        )
    except Conflict as exc:
        count = await rt.store.dead_letters.count(session.owner_id, f.dead_letters())
        context = {"session": session, "f": f, "count": count, "changed": exc.detail}
        return page(request, "confirm.html", context, status=409)
    notice = f"Redriven {done.redriven}; skipped {len(done.skipped)}."
    return RedirectResponse("/board?" + f.query(notice=notice), status_code=303)


@router.post("/endpoints")
async def create_endpoint(request: Request, rt: RuntimeDep) -> Response:
    session, form = await _signed_in(request, rt)
    name = _text(form, "name", 100)
    try:
        await rt.store.credentials.create_endpoint(
            session.owner_id, name, open_intake=_text(form, "open_intake") == "on", origin=BOARD
        )
    except StoreError as exc:
        return _see("/board", notice=f"Not created: {exc.detail}")
    return _see(f"/board/endpoints/{name}", notice="Endpoint created.")


@router.post("/endpoints/{name}/tokens")
async def create_token(request: Request, rt: RuntimeDep, name: NamePath) -> Response:
    session, form = await _signed_in(request, rt)
    role = _text(form, "kind")
    principal = _text(form, "name", 200)
    if role not in ("worker", "source") or not principal:
        return _see(f"/board/endpoints/{name}", notice="Give a kind and a name.")
    try:
        _view, secret = await rt.store.credentials.create_token(
            session.owner_id, name, role=role, principal=principal, origin=BOARD
        )
    except StoreError as exc:
        return _see(f"/board/endpoints/{name}", notice=f"Not created: {exc.detail}")
    # The secret is on this response only: reloading the endpoint page never shows it again.
    context = {"session": session, "endpoint": name, "secret": secret, "kind": role,
               "name": principal}  # fmt: skip
    return page(request, "secret.html", context, status=201)


@router.post("/endpoints/{name}/tokens/{token_id}/delete")
async def delete_token(
    request: Request, rt: RuntimeDep, name: NamePath, token_id: IdPath
) -> Response:
    session, _form_data = await _signed_in(request, rt)
    try:
        await rt.store.credentials.delete_token(session.owner_id, name, token_id, origin=BOARD)
    except StoreError as exc:
        return _see(f"/board/endpoints/{name}", notice=f"Not deleted: {exc.detail}")
    return _see(f"/board/endpoints/{name}", notice=f"Token {token_id} deleted.")
