"""The periodic sweeper: reaps lapsed, budget-spent scans so dead letters are announced even
when no worker polls."""

from __future__ import annotations

import asyncio

from prometheus_client import Counter

from mainframe.logs import get_logger
from mainframe.store import Store

# Dead letters reaped per sweep transaction; the sweep repeats until fewer come back.
SWEEP_BATCH = 500
# How often the planner's statistics are checked on PostgreSQL (store/statistics.py).
STATISTICS_SECONDS = 5.0
# How often the credentials requests presented have their last use written (store/usage.py).
TOKEN_USE_SECONDS = 30.0


async def sweep_once(store: Store) -> int:
    """Reap until nothing is left; return how many lapsed leases were reaped (dead-lettered
    at the cap, sent round again below it)."""
    total = 0
    while True:
        reaped = await store.leasing.sweep(limit=SWEEP_BATCH)
        total += reaped
        if reaped < SWEEP_BATCH:
            return total


async def sweep_forever(store: Store, *, every: float, failures: Counter | None = None) -> None:
    log = get_logger()
    while True:
        await asyncio.sleep(every)
        try:
            reaped = await sweep_once(store)
        except Exception as exc:  # keep sweeping: the next round may succeed
            log.error("sweep_failed", error=f"{type(exc).__name__}: {exc}")
            if failures is not None:
                failures.inc()
            continue
        if reaped:
            log.info("sweep_reaped", reaped=reaped)


async def keep_statistics(store: Store, *, every: float) -> None:
    """Keep the planner's statistics of the growing tables current (PostgreSQL only)."""
    log = get_logger()
    while True:
        await asyncio.sleep(every)
        try:
            analysed = await store.statistics.refresh()
        except Exception as exc:  # the next round may succeed
            log.warning("statistics_refresh_failed", error=f"{type(exc).__name__}: {exc}")
            continue
        if analysed:
            log.info("statistics_refreshed", tables=analysed)


async def keep_token_use(store: Store, *, every: float) -> None:
    """Write the last use of the credentials this process's requests presented."""
    log = get_logger()
    while True:
        await asyncio.sleep(every)
        try:
            await store.usage.flush()
        except Exception as exc:  # the next round writes them; a last use is a hint
            log.warning("token_use_flush_failed", error=f"{type(exc).__name__}: {exc}")
