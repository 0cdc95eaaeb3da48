"""The dragonfly compatibility surface: the routes an unmodified dragonfly-client-rs worker
calls (a Cloudflare Access handshake, rules, jobs, results) and those its loader and bot call
(queueing, lookups, queue status, reports, alert threshold, suppressions), served under
`/dragonfly` over the same store as Mainframe's own API. `install` is its entry point; only
the app imports this package."""

from __future__ import annotations

from fastapi import FastAPI

from mainframe.dragonfly import deployment, suppressions
from mainframe.dragonfly.routes import router
from mainframe.dragonfly.surface import NO_KEY, build_surface
from mainframe.logs import get_logger
from mainframe.settings import Settings
from mainframe.store import Store

__all__ = ["install"]


def install(app: FastAPI, *, store: Store, settings: Settings) -> None:
    """Serve the dragonfly routes on `app` over `store`."""
    surface = build_surface(store, settings)
    app.state.dragonfly = surface
    app.include_router(router)
    app.include_router(deployment.router)
    app.include_router(suppressions.router)
    if surface.sessions is None:
        get_logger().warning("dragonfly_sessions_unavailable", detail=NO_KEY)
