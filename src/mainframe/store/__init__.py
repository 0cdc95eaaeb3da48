"""The store: the only package that speaks SQL. `open_store` is its entry point."""

from __future__ import annotations

from mainframe.clock import Clock, to_us
from mainframe.lifecycle.backoff import RetryPolicy
from mainframe.settings import Settings
from mainframe.store.budget import Budget
from mainframe.store.closing import Closed, Report
from mainframe.store.engine import COMMAND_BUSY_MS, create_store_engine, is_sqlite
from mainframe.store.errors import (
    Conflict,
    Invalid,
    NotFound,
    Stale,
    StoreError,
    Unauthorized,
    Unavailable,
)
from mainframe.store.hook_secrets import open_box
from mainframe.store.intake import ScanSpec, Submitted
from mainframe.store.records import Job, Principal, ScanRecord
from mainframe.store.results import ItemOutcome
from mainframe.store.store import Store
from mainframe.store.uow import Publish, discard

__all__ = [
    "Budget",
    "Closed",
    "Conflict",
    "Invalid",
    "ItemOutcome",
    "Job",
    "NotFound",
    "Principal",
    "Publish",
    "Report",
    "ScanRecord",
    "ScanSpec",
    "Stale",
    "Store",
    "StoreError",
    "Submitted",
    "Unauthorized",
    "Unavailable",
    "is_sqlite",
    "open_store",
]


def open_store(
    settings: Settings,
    *,
    clock: Clock | None = None,
    publish: Publish = discard,
    busy_timeout_ms: int = COMMAND_BUSY_MS,
) -> Store:
    """A Store on the configured database (the schema must already be at head)."""
    engine = create_store_engine(
        settings.database_url, pool_size=settings.pool_size, busy_timeout_ms=busy_timeout_ms
    )
    budget = Budget.of(
        job_timeout=settings.job_timeout,
        max_attempts=settings.max_job_attempts,
        reap_per_poll=settings.reap_per_poll,
        max_wait=settings.max_wait_seconds,
    )
    retry = RetryPolicy(base=settings.retry_base_seconds, cap=settings.retry_max_seconds)
    key = settings.secret_key.get_secret_value() if settings.secret_key else None
    return Store.build(
        engine,
        budget,
        retry=retry,
        clock=clock,
        publish=publish,
        hook_box=open_box(key, settings.database_url),
        rotation_grace_us=to_us(settings.hooks_rotation_grace_seconds),
    )
