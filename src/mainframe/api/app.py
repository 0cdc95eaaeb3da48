"""The ASGI application: routes, error handling, body bounds, the sweeper's lifetime."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from fastapi import FastAPI

from mainframe import __version__, board, dragonfly, effects
from mainframe.api import (
    dead_letters,
    deliveries,
    docs,
    endpoints,
    errors,
    hooks,
    jobs,
    ops,
    scans,
)
from mainframe.api.deps import Runtime
from mainframe.api.lane import WorkerLane, lane_routes
from mainframe.api.limits import BodyLimit
from mainframe.api.timing import RequestTiming
from mainframe.clock import Clock
from mainframe.hooks import build_dispatcher, log_hook_settings
from mainframe.metrics import Metrics
from mainframe.metrics.reconcile import reconcile_forever, reconcile_once
from mainframe.ratelimit import TokenBucket
from mainframe.settings import Settings
from mainframe.store import open_store
from mainframe.store.sqlite import SERVER_BUSY_MS
from mainframe.sweeper import (
    STATISTICS_SECONDS,
    TOKEN_USE_SECONDS,
    keep_statistics,
    keep_token_use,
    sweep_forever,
    sweep_once,
)

# Attempts, a second apart, at the start-up reconciliation before the server reports healthy.
STARTUP_RECONCILE_TRIES = 30


def build_runtime(settings: Settings, *, clock: Clock | None = None) -> Runtime:
    metrics = Metrics()
    store = open_store(settings, clock=clock, busy_timeout_ms=SERVER_BUSY_MS)
    dispatcher = build_dispatcher(settings, store.hooks, metrics=metrics.hooks, clock=store.clock)
    # The dispatcher reads hooks through the store whose events it announces, so the
    # publisher is attached once both exist.
    store.db.publish = effects.wire(metrics, dispatcher=dispatcher)
    limiter = TokenBucket(
        rate_per_s=settings.stats_rate_per_minute / 60.0,
        burst=settings.stats_burst,
        clock=store.clock,
    )
    sign_ins = TokenBucket(
        rate_per_s=settings.board_sign_in_per_minute / 60.0,
        burst=settings.board_sign_in_burst,
        clock=store.clock,
    )
    return Runtime(
        settings=settings,
        store=store,
        metrics=metrics,
        stats_limiter=limiter,
        sign_in_limiter=sign_ins,
        dispatcher=dispatcher,
    )


def create_app(
    settings: Settings, *, runtime: Runtime | None = None, sweeper: bool = True
) -> FastAPI:
    rt = runtime or build_runtime(settings)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if rt.dispatcher is not None:
            await rt.dispatcher.start()
            log_hook_settings(settings, keyed=rt.store.hooks.box is not None)
        await sweep_once(rt.store)
        await _first_reconciliation(rt)
        every = settings.metrics_refresh_seconds
        tasks = [
            asyncio.create_task(reconcile_forever(rt.store, rt.metrics, every=every)),
            asyncio.create_task(keep_token_use(rt.store, every=TOKEN_USE_SECONDS)),
        ]
        if rt.store.db.dialect == "postgresql":
            tasks.append(asyncio.create_task(keep_statistics(rt.store, every=STATISTICS_SECONDS)))
        if sweeper:
            tasks.append(
                asyncio.create_task(
                    sweep_forever(
                        rt.store, every=settings.sweep_seconds, failures=rt.metrics.sweep_failures
                    )
                )
            )
        rt.ready = True
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if rt.dispatcher is not None:
                await rt.dispatcher.stop()
            with contextlib.suppress(Exception):  # a last use is a hint, never a failed stop
                await rt.store.usage.flush()
            await rt.store.close()

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
    errors.install(app)
    app.include_router(scans.router)
    app.include_router(jobs.router)
    app.include_router(deliveries.router)
    app.include_router(hooks.router)
    app.include_router(ops.router)
    app.include_router(dead_letters.router)
    app.include_router(endpoints.router)
    docs.install(app)
    board.install(app)
    dragonfly.install(app, store=rt.store, settings=settings)

    # Innermost first: the hot routes' lane sits right above FastAPI's own layers.
    app.add_middleware(WorkerLane, routes=lane_routes(jobs.router, scans.router))
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(RequestTiming, metrics=rt.metrics)
    return app


def app_from_environment() -> FastAPI:
    """The app of one of several server processes (`mainframe serve --workers N`)."""
    from mainframe import logs

    settings = Settings()
    logs.configure(fmt=settings.log_format, level=settings.log_level)
    return create_app(settings)


async def _first_reconciliation(rt: Runtime) -> None:
    # Every gauge must exist from the first scrape, so /healthz waits for this to succeed.
    for _ in range(STARTUP_RECONCILE_TRIES):
        if await reconcile_once(rt.store, rt.metrics):
            return
        await asyncio.sleep(1.0)
    raise RuntimeError("the first metrics reconciliation kept failing; is the database up?")
