"""The owner's endpoints and their worker and source credentials, without database access."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from starlette.responses import Response

from mainframe.api.deps import OwnerDep, RuntimeDep, owner_id
from mainframe.api.responses import REFUSALS
from mainframe.contract.limits import MAX_ID
from mainframe.contract.names import NAME_PATTERN
from mainframe.contract.operator_schemas import (
    PRINTABLE,
    EndpointCreate,
    EndpointDetail,
    EndpointList,
    EndpointPublic,
    QueueChangePublic,
    TokenCreate,
    TokenCreated,
    TokenList,
    WorkersPublic,
)
from mainframe.shapes import operator as shape
from mainframe.store import API

router = APIRouter(prefix="/api/v1/endpoints", tags=["endpoints"])
EndpointPath = Annotated[
    str, Path(max_length=200, pattern=PRINTABLE, description="The endpoint's name.")
]
TokenIdPath = Annotated[int, Path(ge=1, le=MAX_ID, description="The token's id.")]
QueuePath = Annotated[str, Path(max_length=64, pattern=NAME_PATTERN, description="The queue.")]


@router.post("", status_code=201, responses=REFUSALS)
async def create_endpoint(rt: RuntimeDep, owner: OwnerDep, body: EndpointCreate) -> EndpointPublic:
    """A new endpoint of the owner (409 `endpoint_exists` when the name is taken)."""
    view = await rt.store.owners.create_endpoint(owner_id(owner), body.name,
        open_intake=body.open_intake, origin=API,
    )  # fmt: skip
    return shape.endpoint(view)


@router.get("", responses=REFUSALS)
async def list_endpoints(rt: RuntimeDep, owner: OwnerDep) -> EndpointList:
    """The owner's endpoints, by name."""
    views = await rt.store.owners.endpoints(owner_id(owner))
    return EndpointList(endpoints=[shape.endpoint(v) for v in views])


@router.get("/{name}", responses=REFUSALS)
async def get_endpoint(rt: RuntimeDep, owner: OwnerDep, name: EndpointPath) -> EndpointDetail:
    """One of the owner's endpoints, with its paused queues."""
    paused = await rt.store.queues.paused(owner_id(owner), name)
    views = await rt.store.owners.endpoints(owner_id(owner))
    [view] = [v for v in views if v.name == name]
    return shape.endpoint_detail(view, paused)


@router.get("/{name}/workers", responses=REFUSALS)
async def list_workers(rt: RuntimeDep, owner: OwnerDep, name: EndpointPath) -> WorkersPublic:
    """The endpoint's workers at a glance: each one's last request, the leases it holds now,
    its last hour (scans finished, attempts failed, leases lapsed), and whether its failure
    share stands far above the rest's."""
    tokens = await rt.store.owners.tokens(owner_id(owner), name)
    hours = await rt.store.activity.workers(owner_id(owner), name)
    return shape.workers(name, tokens, hours)


@router.post("/{name}/queues/{queue}/pause", responses=REFUSALS)
async def pause_queue(
    rt: RuntimeDep, owner: OwnerDep, name: EndpointPath, queue: QueuePath
) -> QueueChangePublic:
    """Stop leasing the queue's scans: polls answer as if it were empty, intake goes on,
    leases already out run their course, nothing is dead-lettered by the pause."""
    change = await rt.store.queues.pause(owner_id(owner), name, queue, by=owner.name, origin=API)
    return shape.queue_change(change)


@router.post("/{name}/queues/{queue}/resume", responses=REFUSALS)
async def resume_queue(
    rt: RuntimeDep, owner: OwnerDep, name: EndpointPath, queue: QueuePath
) -> QueueChangePublic:
    """Lease the queue's scans again, in the order they had; no redrive needed."""
    change = await rt.store.queues.resume(owner_id(owner), name, queue, by=owner.name, origin=API)
    return shape.queue_change(change)


@router.post("/{name}/tokens", status_code=201, responses=REFUSALS)
async def create_token(
    rt: RuntimeDep, owner: OwnerDep, name: EndpointPath, body: TokenCreate
) -> TokenCreated:
    """A worker or source credential for the endpoint; its secret is in this reply only."""
    role, principal = ("worker", body.worker) if body.worker else ("source", body.source)
    assert principal is not None
    view, secret = await rt.store.owners.create_token(
        owner_id(owner), name, role=role, principal=principal, origin=API
    )
    return TokenCreated(**dict(shape.token(view)), secret=secret)


@router.get("/{name}/tokens", responses=REFUSALS)
async def list_tokens(rt: RuntimeDep, owner: OwnerDep, name: EndpointPath) -> TokenList:
    """The endpoint's credentials: names, kinds, creation; never a secret."""
    views = await rt.store.owners.tokens(owner_id(owner), name)
    return TokenList(tokens=[shape.token(v) for v in views])


@router.delete("/{name}/tokens/{token_id}", status_code=204, responses=REFUSALS)
async def delete_token(
    rt: RuntimeDep, owner: OwnerDep, name: EndpointPath, token_id: TokenIdPath
) -> Response:
    """Delete a credential; it is refused from the next request on, in every server process."""
    await rt.store.owners.delete_token(owner_id(owner), name, token_id, origin=API)
    return Response(status_code=204)
