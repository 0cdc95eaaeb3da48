"""The store: the only package that speaks SQL. `open_store` is its entry point."""

from __future__ import annotations

from mainframe.clock import Clock
from mainframe.settings import Settings
from mainframe.store.base import Budget, Publish
from mainframe.store.engine import create_store_engine, is_sqlite
from mainframe.store.errors import Conflict, Invalid, NotFound, Stale, StoreError, Unauthorized
from mainframe.store.records import Job, Principal, ScanRecord
from mainframe.store.reporting import ItemOutcome
from mainframe.store.results import Report
from mainframe.store.store import Store

__all__ = [
    "Budget",
    "Conflict",
    "Invalid",
    "ItemOutcome",
    "Job",
    "NotFound",
    "Principal",
    "Publish",
    "Report",
    "ScanRecord",
    "Stale",
    "Store",
    "StoreError",
    "Unauthorized",
    "is_sqlite",
    "open_store",
]


def open_store(
    settings: Settings, *, clock: Clock | None = None, publish: Publish | None = None
) -> Store:
    """A Store on the configured database (the schema must already be at head)."""
    engine = create_store_engine(settings.database_url, pool_size=settings.pool_size)
    budget = Budget.of(
        job_timeout=settings.job_timeout,
        max_attempts=settings.max_job_attempts,
        reap_per_poll=settings.reap_per_poll,
        max_wait=settings.max_wait_seconds,
    )
    if publish is None:
        return Store(engine, budget, clock=clock)
    return Store(engine, budget, clock=clock, publish=publish)
