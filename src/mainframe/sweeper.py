"""The periodic sweeper: reaps lapsed, budget-spent scans so dead letters are announced even
when no worker polls."""

from __future__ import annotations

import asyncio

from prometheus_client import Counter

from mainframe.logs import get_logger
from mainframe.runner import StoreRunner
from mainframe.store import Store

# Dead letters reaped per sweep transaction; the sweep repeats until fewer come back.
SWEEP_BATCH = 500


async def sweep_once(store: Store, run: StoreRunner) -> int:
    """Reap until nothing is left; return how many scans were dead-lettered."""
    total = 0
    while True:
        reaped = await run(store.leasing.sweep, limit=SWEEP_BATCH)
        total += reaped
        if reaped < SWEEP_BATCH:
            return total


async def sweep_forever(
    store: Store, run: StoreRunner, *, every: float, failures: Counter | None = None
) -> None:
    log = get_logger()
    while True:
        await asyncio.sleep(every)
        try:
            reaped = await sweep_once(store, run)
        except Exception as exc:  # keep sweeping: the next round may succeed
            log.error("sweep_failed", error=f"{type(exc).__name__}: {exc}")
            if failures is not None:
                failures.inc()
            continue
        if reaped:
            log.info("sweep_reaped", dead_lettered=reaped)
