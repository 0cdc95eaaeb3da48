"""The owner's hook routes under an endpoint: create, list, delete, rotate, enable."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from starlette.responses import Response

from mainframe.api.deps import OwnerDep, Runtime, RuntimeDep, owner_id
from mainframe.api.responses import REFUSALS
from mainframe.contract.hook_schemas import (
    HookCreate,
    HookCreated,
    HookList,
    HookPublic,
    HookRotated,
)
from mainframe.contract.limits import MAX_ID
from mainframe.contract.schemas import AsciiInt
from mainframe.hooks import manage
from mainframe.shapes import hooks as hook_shapes
from mainframe.store import API

router = APIRouter(prefix="/api/v1/endpoints/{name}/hooks", tags=["hooks"])
EndpointPath = Annotated[str, Path(max_length=200, description="The endpoint's name.")]
HookIdPath = Annotated[int, Path(ge=1, le=MAX_ID, description="The hook's id."), AsciiInt]


def _changed(rt: Runtime, endpoint_id: int) -> None:
    # This process sees the change at once; other processes within their cache's second.
    if rt.dispatcher is not None:
        rt.dispatcher.forget(endpoint_id)


@router.post("", status_code=201, responses=REFUSALS)
async def create_hook(
    rt: RuntimeDep, owner: OwnerDep, name: EndpointPath, body: HookCreate
) -> HookCreated:
    """Add a hook to the endpoint (at most five); the reply carries its signing secret."""
    view, secret = await manage.create(
        rt.store.hooks,
        rt.settings,
        owner_id(owner),
        name,
        url=body.url,
        queue=body.queue,
        rate_per_minute=body.rate_per_minute,
        origin=API,
    )
    _changed(rt, view.endpoint_id)
    return hook_shapes.created(view, secret)


@router.get("", responses=REFUSALS)
async def list_hooks(rt: RuntimeDep, owner: OwnerDep, name: EndpointPath) -> HookList:
    """The endpoint's hooks with their failure bookkeeping; never a secret."""
    views = await rt.store.hooks.listing(owner_id(owner), name)
    return HookList(hooks=[hook_shapes.public(view) for view in views])


@router.delete("/{hook_id}", status_code=204, responses=REFUSALS)
async def delete_hook(
    rt: RuntimeDep, owner: OwnerDep, name: EndpointPath, hook_id: HookIdPath
) -> Response:
    """Remove a hook."""
    _changed(rt, await rt.store.hooks.delete(owner_id(owner), name, hook_id, origin=API))
    return Response(status_code=204)


@router.post("/{hook_id}/rotate", responses=REFUSALS)
async def rotate_hook(
    rt: RuntimeDep, owner: OwnerDep, name: EndpointPath, hook_id: HookIdPath
) -> HookRotated:
    """A new signing secret; the previous one also signs until `previous_valid_until`."""
    done = await manage.rotate(rt.store.hooks, owner_id(owner), name, hook_id, origin=API)
    _changed(rt, done.endpoint_id)
    return hook_shapes.rotation(done)


@router.post("/{hook_id}/enable", responses=REFUSALS)
async def enable_hook(
    rt: RuntimeDep, owner: OwnerDep, name: EndpointPath, hook_id: HookIdPath
) -> HookPublic:
    """Turn a disabled hook back on, its failure count reset."""
    view = await rt.store.hooks.enable(owner_id(owner), name, hook_id, origin=API)
    _changed(rt, view.endpoint_id)
    return hook_shapes.public(view)
