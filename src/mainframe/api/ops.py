"""Probes and the metrics scrape, for load balancers, Kubernetes and Prometheus."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.responses import Response

from mainframe import __version__
from mainframe.api.deps import RuntimeDep
from mainframe.api.responses import Reply, error
from mainframe.contract.schemas import ErrorBody, HealthPublic

router = APIRouter(tags=["ops"])
_PROBE_REFUSALS: dict[int | str, dict[str, Any]] = {503: {"model": ErrorBody}}
_METRICS: dict[int | str, dict[str, Any]] = {
    200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text"}
}


@router.get(
    "/healthz",
    response_model=HealthPublic,
    responses={503: {"model": HealthPublic, "description": "still starting"}},
)
async def healthz(rt: RuntimeDep) -> HealthPublic | Reply:
    """Liveness: 200 once start-up (schema check, first sweep) is done, whatever the
    database does afterwards; restart the process only when this fails."""
    if not rt.ready:
        return Reply(HealthPublic(status="starting"), status_code=503)
    return HealthPublic(status="ok", version=__version__)


@router.get("/readyz", response_model=HealthPublic, responses=_PROBE_REFUSALS)
async def readyz(rt: RuntimeDep) -> HealthPublic | Reply:
    """Readiness: 200 while this process can serve requests (started, and the database
    answers); 503 `database_unavailable` or `database_busy` otherwise."""
    if not rt.ready:
        return error(503, "starting", "the server is still starting")
    await rt.store.ping()
    return HealthPublic(status="ready")


@router.get("/metrics", response_class=Response, responses=_METRICS)
async def metrics(rt: RuntimeDep) -> Response:
    """Prometheus text format; a scrape never queries the database."""
    return Response(generate_latest(rt.metrics.registry), media_type=CONTENT_TYPE_LATEST)
