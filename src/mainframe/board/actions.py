"""The board's state-changing forms: sign in and out, redrive one scan or the current filter,
create an endpoint, issue and delete credentials. Each checks its CSRF token first and answers
with a redirect to a page (post/redirect/get), so a reload never repeats it; what it has to
say travels in the session's flash, never in the URL. Each change is audited as
coming from the board."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Path, Request
from starlette.datastructures import FormData
from starlette.responses import RedirectResponse, Response

from mainframe.board import filters
from mainframe.board.auth import (
    SESSION_COOKIE,
    SIGN_IN_COOKIE,
    check_csrf,
    clear_cookie,
    current_session,
    safe_next,
    set_session_cookie,
    tell,
)
from mainframe.board.pages import error_page, sign_in_page
from mainframe.contract.limits import MAX_ID
from mainframe.contract.operator_schemas import PRINTABLE
from mainframe.contract.text import printable
from mainframe.logs import get_logger
from mainframe.ratelimit import retry_after_header
from mainframe.store import BOARD, Conflict, Session, StoreError, digest
from mainframe.web import RuntimeDep
from mainframe.wiring import Runtime

router = APIRouter(prefix="/board", include_in_schema=False)
# Ids within the database's 64 bits; names without control characters (PostgreSQL refuses NUL).
IdPath = Annotated[int, Path(ge=1, le=MAX_ID)]
NamePath = Annotated[str, Path(max_length=200, pattern=PRINTABLE)]
MAX_FORM_FIELDS = 20  # the largest form has nine fields
NOT_AN_OWNER_TOKEN = "That is not an owner token."


async def _form(request: Request) -> FormData:
    return await request.form(max_files=0, max_fields=MAX_FORM_FIELDS)


def _text(form: FormData, name: str, limit: int = 300) -> str:
    """A form field, trimmed and bounded; control characters (a NUL) are dropped."""
    value = form.get(name)
    if not isinstance(value, str):
        return ""
    return "".join(ch for ch in value.strip()[:limit] if printable(ch))


def _see(path: str) -> RedirectResponse:
    return RedirectResponse(path, status_code=303)


def _endpoint(name: str, suffix: str = "") -> str:
    return f"/board/endpoints/{quote(name)}{suffix}"


async def _signed_in(request: Request, rt: RuntimeDep) -> tuple[Session, FormData]:
    # The form is read before the session is checked: if the session ended, sign-in returns
    # the operator to the page this form was on (its `from` field).
    form = await _form(request)
    session = await current_session(request, rt, back=form.get("from"))
    check_csrf(session.csrf, form.get("csrf"))
    return session, form


def _client(request: Request) -> str:
    return request.client.host if request.client else "unknown"


@router.post("/sign-in")
async def sign_in(request: Request, rt: RuntimeDep) -> Response:
    form = await _form(request)
    next_path = safe_next(form.get("next"))
    wait = rt.sign_in_limiter.take(_client(request))
    if wait > 0:
        get_logger().warning("board_sign_in_failed", client=_client(request), reason="rate_limited")
        retry = retry_after_header(wait)
        message = f"Too many sign-in attempts from your address; try again in {retry} s."
        refused = sign_in_page(request, next_path=next_path, error=message, reason=None,
                               status=429)  # fmt: skip
        refused.headers["Retry-After"] = retry
        return refused
    check_csrf(request.cookies.get(SIGN_IN_COOKIE), form.get("csrf"))
    lifetime = round(rt.settings.board_session_seconds * 1_000_000)
    token = _text(form, "token", 200)
    made = await rt.store.sessions.sign_in(token, lifetime_us=lifetime, origin=BOARD)
    if made is not None:
        rt.store.authentication.note(digest(token))  # an owner token's last use, like the API's
    if made is None:
        # The address, never the token: a mistyped token is often a real one.
        get_logger().warning(
            "board_sign_in_failed", client=_client(request), reason="not_an_owner_token"
        )
        return sign_in_page(
            request, next_path=next_path, error=NOT_AN_OWNER_TOKEN, reason=None, status=401
        )
    secret, _session = made
    signed = _see(next_path)
    set_session_cookie(request, signed, secret, int(rt.settings.board_session_seconds))
    clear_cookie(request, signed, SIGN_IN_COOKIE)
    return signed


@router.post("/sign-out")
async def sign_out(request: Request, rt: RuntimeDep) -> Response:
    await _signed_in(request, rt)
    await rt.store.sessions.sign_out(request.cookies.get(SESSION_COOKIE, ""))
    response = _see("/board/sign-in")
    clear_cookie(request, response, SESSION_COOKIE)
    return response


async def _say(request: Request, rt: Runtime, notice: str, **more: Any) -> None:
    await tell(request, rt, {"notice": notice, **more})


@router.post("/scans/{scan_id}/redrive")
async def redrive_one(request: Request, rt: RuntimeDep, scan_id: IdPath) -> Response:
    session, _form_data = await _signed_in(request, rt)
    done = await rt.store.dead_letters.redrive_ids(session.owner_id, [scan_id], origin=BOARD)
    notice = f"Scan #{scan_id} redriven: back in the queue with a fresh attempt budget."
    if done.skipped:
        notice = f"Scan #{scan_id} not redriven: {done.skipped[0].reason.replace('_', ' ')}."
    await _say(request, rt, notice)
    back = filters.lenient(request.query_params).query()
    return _see(f"/board/scans/{scan_id}" + (f"?{back}" if back else ""))


@router.post("/redrive")
async def redrive_filter(request: Request, rt: RuntimeDep) -> Response:
    session, form = await _signed_in(request, rt)
    try:
        fields = ("q", "endpoint", "queue", "reason", "cause")
        f = filters.parse({k: _text(form, k) for k in fields})
        confirm = int(_text(form, "confirm", 12))
    except (filters.BadFilter, ValueError):
        context = {"session": session}
        return error_page(request, context, 422, "This redrive form is not usable.")
    f = filters.BoardFilter("dead", f.q, f.endpoint, f.queue, f.reason, cause=f.cause)
    try:
        done = await rt.store.dead_letters.redrive_filter(
            session.owner_id, f.dead_letters(), confirm=confirm, origin=BOARD
        )
    except Conflict as exc:
        await _say(request, rt, f"Nothing was redriven. The count changed since you looked: "
                                f"{exc.detail}.")  # fmt: skip
        return _see("/board/redrive?" + f.search())
    skipped = f"; skipped {len(done.skipped)}" if done.skipped else ""
    await _say(request, rt, f"Redriven {done.redriven} dead letters{skipped}.")
    return _see("/board?" + f.search())


@router.post("/endpoints")
async def create_endpoint(request: Request, rt: RuntimeDep) -> Response:
    session, form = await _signed_in(request, rt)
    name = _text(form, "name", 100)
    try:
        await rt.store.owners.create_endpoint(
            session.owner_id, name, open_intake=_text(form, "open_intake") == "on", origin=BOARD
        )
    except StoreError as exc:
        await _say(request, rt, f"Endpoint not created: {exc.detail}.")
        return _see("/board#endpoints")
    await _say(request, rt, f"Endpoint {name} created.")
    return _see(_endpoint(name))


@router.post("/endpoints/{name}/tokens")
async def create_token(request: Request, rt: RuntimeDep, name: NamePath) -> Response:
    session, form = await _signed_in(request, rt)
    role = _text(form, "kind")
    principal = _text(form, "name", 200)
    if role not in ("worker", "source") or not principal:
        await _say(request, rt, "No credential issued: give a kind and a name.")
        return _see(_endpoint(name))
    try:
        view, secret = await rt.store.owners.create_token(
            session.owner_id, name, role=role, principal=principal, origin=BOARD
        )
    except StoreError as exc:
        await _say(request, rt, f"No credential issued: {exc.detail}.")
        return _see(_endpoint(name))
    # The secret waits in the session, sealed, for the one page that shows it: reloading
    # that page, or going back to this form's answer, neither issues nor shows another.
    credential = {"endpoint": name, "id": view.id, "kind": role, "name": principal,
                  "secret": secret}  # fmt: skip
    await _say(request, rt, f"Issued {role} token \u201c{principal}\u201d.", credential=credential)
    return _see(_endpoint(name, "/credential"))


@router.post("/endpoints/{name}/tokens/{token_id}/delete")
async def delete_token(
    request: Request, rt: RuntimeDep, name: NamePath, token_id: IdPath
) -> Response:
    session, _form_data = await _signed_in(request, rt)
    try:
        tokens = await rt.store.owners.tokens(session.owner_id, name)
        token = next((t for t in tokens if t.id == token_id), None)
        await rt.store.owners.delete_token(session.owner_id, name, token_id, origin=BOARD)
    except StoreError as exc:
        await _say(request, rt, f"Token {token_id} not deleted: {exc.detail}.")
        return _see(_endpoint(name))
    what = f"{token.kind} token \u201c{token.name}\u201d" if token else "token"
    await _say(request, rt, f"Deleted {what} (id {token_id}) of endpoint {name}.")
    return _see(_endpoint(name))


@router.post("/endpoints/{name}/queues/{action}")
async def pause_or_resume_queue(
    request: Request, rt: RuntimeDep, name: NamePath, action: str
) -> Response:
    session, form = await _signed_in(request, rt)
    queue = _text(form, "queue", 100)
    if action not in ("pause", "resume"):
        return _see(_endpoint(name))
    change = rt.store.queues.pause if action == "pause" else rt.store.queues.resume
    try:
        done = await change(session.owner_id, name, queue, by=session.owner, origin=BOARD)
    except StoreError as exc:
        await _say(request, rt, f"Queue {queue} not {action}d: {exc.detail}.")
        return _see(_endpoint(name))
    if not done.changed:
        state = "already paused" if action == "pause" else "not paused"
        await _say(request, rt, f"Queue {queue} was {state}; nothing changed.")
    elif action == "pause":
        await _say(request, rt, f"Queue {queue} paused: its {done.scans} queued scans are held.")
    else:
        await _say(request, rt, f"Queue {queue} resumed: {done.scans} scans are due again.")
    return _see(_endpoint(name))
