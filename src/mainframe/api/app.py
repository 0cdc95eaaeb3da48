"""The ASGI application: every shell's routes, error handling and body bounds around one
runtime (mainframe.wiring builds it and runs its background work)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI

from mainframe import __version__, board, dragonfly
from mainframe.api import (
    dead_letters,
    deliveries,
    docs,
    endpoints,
    errors,
    hooks,
    hot,
    ops,
    scans,
)
from mainframe.api.edge import BodyLimit, RequestEdge
from mainframe.settings import Settings
from mainframe.wiring import Runtime, build_runtime, serving

__all__ = ["app_from_environment", "build_runtime", "create_app"]
# The worker's routes and intake, served ahead of FastAPI's layers (`api/hot.py::HotFront`)
# and matched in this order: a worker's poll and result first, as they are the most frequent.
HOT = [*hot.worker.routes, *scans.hot.routes]


def create_app(
    settings: Settings,
    *,
    runtime: Runtime | None = None,
    sweeper: bool = True,
    own_process: bool = False,
) -> FastAPI:
    """The app over `runtime` (or one built from `settings`); `own_process` when it is the
    only app of a server process (`mainframe serve`), not one of a test's."""
    rt = runtime or build_runtime(settings)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with serving(rt, sweeper=sweeper, own_process=own_process):
            yield

    app = FastAPI(
        title="Mainframe",
        version=__version__,
        lifespan=lifespan,
        description="Coordinates package scans for a fleet of scanner workers.",
        # Both default pages load their assets from a CDN; docs.install serves ours.
        docs_url=None,
        redoc_url=None,
        # Mainframe exports Prometheus metrics and JSON logs, not OpenTelemetry; with it off,
        # FastAPI skips looking for OpenTelemetry providers on every request.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.runtime = rt
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    errors.install(app)
    # Also in FastAPI's router, which answers a hot path asked with another method (405).
    app.router.routes.extend(HOT)
    app.include_router(scans.router)
    app.include_router(deliveries.router)
    app.include_router(hooks.router)
    app.include_router(ops.router)
    app.include_router(dead_letters.router)
    app.include_router(endpoints.router)
    docs.install(app)
    board.install(app)
    dragonfly.install(app, store=rt.store, settings=settings)

    # Innermost first: the hot routes right above FastAPI's exception layer and router.
    app.add_middleware(hot.HotFront, routes=HOT)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(RequestEdge, metrics=rt.metrics, access_log=settings.access_log)
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document of its routes, with the hot routes' operations (`api/docs.py`)."""
    if app.openapi_schema is None:
        docs.document(FastAPI.openapi(app), HOT)  # FastAPI keeps its document, amended here
    assert app.openapi_schema is not None
    return app.openapi_schema


def app_from_environment() -> FastAPI:
    """The app of one of several server processes (`mainframe serve --workers N`)."""
    from mainframe import logs

    settings = Settings()
    logs.configure(fmt=settings.log_format, level=settings.log_level)
    return create_app(settings, own_process=True)
