"""The composition of one server process: the runtime every shell shares (settings, store,
metrics, limiters, dispatcher), how it is built from settings, and the background work that
runs for as long as the process serves. The API, the board and the dragonfly surface take
the runtime it builds (`web.py::RuntimeDep`); none of them builds or opens anything itself."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from typing import Any

from mainframe import effects
from mainframe.clock import Clock
from mainframe.hooks import Dispatcher, build_dispatcher, log_hook_settings
from mainframe.logs import get_logger
from mainframe.metrics import Metrics
from mainframe.metrics.reconcile import reconcile_forever, reconcile_once
from mainframe.parsers import redact_url
from mainframe.ratelimit import TokenBucket
from mainframe.settings import Settings
from mainframe.store import SERVER_BUSY_MS, Principal, Store, StoreError, open_store
from mainframe.sweeper import (
    ACTIVITY_SECONDS,
    QUEUE_VACUUM_SECONDS,
    STATISTICS_SECONDS,
    TOKEN_USE_SECONDS,
    keep_activity,
    keep_queue_clean,
    keep_statistics,
    keep_token_use,
    prune_forever,
    sweep_forever,
    sweep_once,
)

# Attempts, a second apart, at the start-up reconciliation before the server reports healthy.
STARTUP_RECONCILE_TRIES = 30


@dataclass
class Runtime:
    settings: Settings
    store: Store
    metrics: Metrics
    stats_limiter: TokenBucket
    sign_in_limiter: TokenBucket
    dispatcher: Dispatcher | None = None
    ready: bool = False

    async def principal(self, secret: str) -> Principal | None:
        # Read on every request, never cached: a deleted credential or a revoked endpoint
        # must stop working at once in every server process (one unique-index probe).
        found = await self.store.authentication.authenticate(secret)
        if found is not None:
            self.store.authentication.note(found.digest)
        return found


def build_runtime(settings: Settings, *, clock: Clock | None = None) -> Runtime:
    """Open the store and build what serves on it; nothing runs until `serving`."""
    metrics = Metrics()
    store = open_store(settings, clock=clock, busy_timeout_ms=SERVER_BUSY_MS)
    dispatcher = build_dispatcher(settings, store.hooks, metrics=metrics.hooks, clock=store.clock)
    # The dispatcher reads hooks through the store whose events it announces, so the
    # publisher is attached once both exist.
    store.db.publish = effects.wire(metrics, dispatcher=dispatcher, activity=store.activity)
    metrics.watch_pool(store.db.pool_counts)
    return Runtime(
        settings=settings,
        store=store,
        metrics=metrics,
        stats_limiter=_per_minute(settings.stats_rate_per_minute, settings.stats_burst, store),
        sign_in_limiter=_per_minute(
            settings.board_sign_in_per_minute, settings.board_sign_in_burst, store
        ),
        dispatcher=dispatcher,
    )


def _per_minute(rate: float, burst: int, store: Store) -> TokenBucket:
    return TokenBucket(rate_per_s=rate / 60.0, burst=burst, clock=store.clock)


@contextlib.asynccontextmanager
async def serving(
    rt: Runtime, *, sweeper: bool = True, own_process: bool = False
) -> AsyncIterator[None]:
    """Run the process's background work around its serving, then close the store. A server
    that has its process to itself (`own_process`) also settles its heap once started."""
    if rt.dispatcher is not None:
        await rt.dispatcher.start()
        log_hook_settings(rt.settings, keyed=rt.store.hooks.box is not None)
    await _report_host(rt)
    await _first_sweep(rt)
    await _first_reconciliation(rt)
    if own_process:
        settle_heap()
    tasks = [asyncio.create_task(work) for work in _background(rt, sweeper=sweeper)]
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
            await rt.store.authentication.flush()
        with contextlib.suppress(Exception):  # nor is a last submission
            await rt.store.last_submissions.flush()
        with contextlib.suppress(Exception):  # nor are the charts' counts
            await rt.store.activity.flush()
        await rt.store.close()


def settle_heap() -> None:
    """Take what start-up built out of the garbage collector's reach for good."""
    # It lives as long as the process, yet every full collection walked all of it: about
    # 100 ms with the loop stopped, every few seconds under load, which set the requests'
    # p99 (docs/performance.md, *The collector's pauses*). Collected once first, so no
    # garbage of start-up is kept with it.
    gc.collect()
    gc.freeze()


def _background(rt: Runtime, *, sweeper: bool) -> list[Coroutine[Any, Any, None]]:
    every = rt.settings.metrics_refresh_seconds
    work = [
        reconcile_forever(rt.store, rt.metrics, every=every),
        keep_token_use(rt.store, every=TOKEN_USE_SECONDS),
        keep_activity(rt.store, every=ACTIVITY_SECONDS),
    ]
    if rt.store.db.dialect == "postgresql":
        work.append(keep_statistics(rt.store, every=STATISTICS_SECONDS))
        work.append(keep_queue_clean(rt.store, every=QUEUE_VACUUM_SECONDS))
    if sweeper:
        every = rt.settings.sweep_seconds
        failures = rt.metrics.sweep_failures
        work.append(sweep_forever(rt.store, every=every, failures=failures))
        work.append(prune_forever(rt.store, every=every, failures=failures))
    return work


async def _report_host(rt: Runtime) -> None:
    # One line each for what an operator must fix on the database side; the server serves
    # on (answering 503 to writes on a read-only host) and picks up a fix without a restart.
    log = get_logger()
    try:
        report = await rt.store.host_report()
    except StoreError as exc:
        log.warning("database_not_checked", error=exc.code, detail=exc.detail)
        return
    url = redact_url(rt.settings.database_url)
    if not report.writable:
        log.error(
            "database_read_only",
            database=url,
            detail="the host takes no writes (a standby?); writes answer 503 until it does",
        )
    if report.not_in_force:
        log.warning(
            "database_settings_not_in_force",
            database=url,
            found=report.not_in_force,
            detail="run `mainframe db upgrade` as the servers' role (docs/scale-out.md)",
        )
    _report_pooler(rt, report.pooler_keeps_prepared)


def _report_pooler(rt: Runtime, keeps: bool | None) -> None:
    # The store follows what the pooler does (store/engine/postgres.py); the setting is what
    # it assumes when the database cannot be asked at start-up.
    if keeps is None or keeps == rt.settings.database_pooler_prepares:
        return
    log = get_logger()
    if keeps:
        log.info(
            "database_pooler_keeps_prepared_statements",
            detail="the pooler keeps prepared statements (max_prepared_statements): the "
            "server keeps its own, as directly; MAINFRAME_DATABASE_POOLER_PREPARES=true says so",
        )
    else:
        log.warning(
            "database_pooler_drops_prepared_statements",
            detail="MAINFRAME_DATABASE_POOLER_PREPARES is true but the pooler does not keep "
            "prepared statements (PgBouncer before 1.21, or max_prepared_statements = 0): the "
            "server sends rows through functions instead; set it to false",
        )


async def _first_sweep(rt: Runtime) -> None:
    try:
        await sweep_once(rt.store)
    except StoreError as exc:  # a read-only host, say: the periodic sweeper tries again
        get_logger().warning("sweep_failed", error=exc.code, detail=exc.detail)


async def _first_reconciliation(rt: Runtime) -> None:
    # Every gauge must exist from the first scrape, so /healthz waits for this to succeed.
    for _ in range(STARTUP_RECONCILE_TRIES):
        if await reconcile_once(rt.store, rt.metrics):
            return
        await asyncio.sleep(1.0)
    raise RuntimeError("the first metrics reconciliation kept failing; is the database up?")
