"""An endpoint's pages: its card with its workers, sources and credentials, the page that
shows a freshly issued secret once (from the session's flash, so a reload issues nothing and
shows nothing), and the confirmation that names the credential a delete would remove."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from starlette.responses import Response

from mainframe.board.auth import signed_in_page
from mainframe.board.pages import error_page
from mainframe.board.render import page
from mainframe.contract.limits import MAX_ID
from mainframe.contract.names import name_problem
from mainframe.contract.operator_schemas import EndpointCardPublic
from mainframe.contract.text import printable
from mainframe.shapes import operator as operator_shapes
from mainframe.store import NotFound, Session, TokenView
from mainframe.web import RuntimeDep

router = APIRouter(prefix="/board", include_in_schema=False)
IdPath = Annotated[int, Path(ge=1, le=MAX_ID)]  # within the database's 64 bits
MAX_NAME = 200
NO_ENDPOINT = "There is no such endpoint of yours."


async def _card(rt: RuntimeDep, session: Session, name: str) -> EndpointCardPublic | None:
    if len(name) > MAX_NAME or not printable(name):
        return None  # no endpoint is named so (PostgreSQL would refuse a NUL in the lookup)
    view = await rt.store.listings.overview(session.owner_id)
    cards = [c for c in view.endpoints if c.name == name]
    return operator_shapes.card(cards[0], view.taken_at) if cards else None


@router.get("/endpoints/{name}")
async def endpoint_page(request: Request, rt: RuntimeDep, name: str) -> Response:
    session, context = await signed_in_page(request, rt)
    card = await _card(rt, session, name)
    if card is None:
        return error_page(request, context, 404, NO_ENDPOINT)
    tokens = await rt.store.owners.tokens(session.owner_id, name)
    paused = await rt.store.queues.paused(session.owner_id, name)
    hours = await rt.store.activity.workers(session.owner_id, name)
    workers = operator_shapes.workers(name, tokens, hours)
    sources = await rt.store.last_submissions.of_endpoint(session.owner_id, name)
    context |= {"card": card, "tokens": tokens, "paused": paused, "workers": workers,
                "sources": sources, "quiet_after": rt.settings.quiet_source_seconds}  # fmt: skip
    return page(request, "endpoint.html", context)


@router.get("/endpoints/{name}/queues/{action}")
async def confirm_queue(request: Request, rt: RuntimeDep, name: str, action: str) -> Response:
    """Pausing or resuming a queue, named, asked first (the queue comes from the form)."""
    session, context = await signed_in_page(request, rt)
    card = await _card(rt, session, name)
    queue = (request.query_params.get("queue") or "").strip()
    if card is None or action not in ("pause", "resume"):
        return error_page(request, context, 404, NO_ENDPOINT)
    problem = name_problem(queue)
    if problem is not None:
        return error_page(request, context, 422, f"That is not a queue's name: {problem}.")
    paused = {q.queue for q in await rt.store.queues.paused(session.owner_id, name)}
    context |= {"endpoint": name, "queue": queue, "action": action, "paused": queue in paused}
    return page(request, "confirm_queue.html", context)


@router.get("/endpoints/{name}/credential")
async def issued_credential(request: Request, rt: RuntimeDep, name: str) -> Response:
    _session, context = await signed_in_page(request, rt)
    issued = context["flash"].get("credential")
    if not isinstance(issued, dict) or issued.get("endpoint") != name:
        issued = None
    return page(request, "secret.html", context | {"endpoint": name, "issued": issued})


async def _token(rt: RuntimeDep, session: Session, name: str, token_id: int) -> TokenView | None:
    if len(name) > MAX_NAME or not printable(name):
        return None
    try:
        tokens = await rt.store.owners.tokens(session.owner_id, name)
    except NotFound:
        return None
    return next((t for t in tokens if t.id == token_id), None)


@router.get("/endpoints/{name}/tokens/{token_id}/delete")
async def confirm_delete_token(
    request: Request, rt: RuntimeDep, name: str, token_id: IdPath
) -> Response:
    session, context = await signed_in_page(request, rt)
    token = await _token(rt, session, name, token_id)
    if token is None:
        message = f"There is no credential {token_id} on an endpoint {name!r} of yours."
        return error_page(request, context, 404, message)
    return page(request, "confirm_delete.html", context | {"endpoint": name, "token": token})
