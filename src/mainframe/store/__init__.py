"""The store: the only package that speaks SQL. `open_store` is its entry point."""

from __future__ import annotations

from mainframe.clock import Clock, to_us
from mainframe.lifecycle.backoff import RetryPolicy
from mainframe.lifecycle.rules import Report
from mainframe.lifecycle.scans import Closed, Job, ScanRecord
from mainframe.settings import Settings
from mainframe.store.accounts.audit import API, BOARD, CLI, Action, AuditEntry, Origin
from mainframe.store.accounts.authentication import Presented, Principal, digest
from mainframe.store.accounts.owners import OPERATOR, EndpointView, TokenView, UnknownName
from mainframe.store.accounts.sessions import ENDED_KEPT_US, Session
from mainframe.store.accounts.submissions import LastSubmission
from mainframe.store.engine.database import (
    Conflict,
    Database,
    Forbidden,
    Invalid,
    NotFound,
    Publish,
    ResultConflict,
    Stale,
    StoreError,
    Unauthorized,
    Unavailable,
    discard,
)
from mainframe.store.engine.migrate import (
    current_revision,
    head_revision,
    is_known_revision,
    set_role_defaults,
    upgrade,
)
from mainframe.store.engine.pg_settings import SessionPolicy
from mainframe.store.engine.postgres import PostgresDatabase
from mainframe.store.engine.sqlalchemy_engine import create_store_engine, database_path, is_sqlite
from mainframe.store.engine.sqlite import COMMAND_BUSY_MS, SERVER_BUSY_MS, SqliteDatabase
from mainframe.store.hooks.deliveries import DeliveryTotals
from mainframe.store.hooks.hook_secrets import open_box
from mainframe.store.hooks.hooks import (
    CONSECUTIVE_FAILURES,
    SECRET_UNREADABLE,
    Hooks,
    HookTarget,
    HookView,
    Rotation,
)
from mainframe.store.operator.activity import HOUR_US, MINUTE_US, Activity, Bar, WorkerHour
from mainframe.store.operator.causes import CausePage, CauseSummary
from mainframe.store.operator.dead_letters import DeadLetter, DeadLetterFilter, DeadLetterPage
from mainframe.store.operator.fleet_snapshot import Snapshot
from mainframe.store.operator.overview import EndpointCard, Overview
from mainframe.store.operator.queues import PausedQueue, QueueChange
from mainframe.store.operator.redrive import Progress, Redriven
from mainframe.store.operator.retention import Due
from mainframe.store.store import Store
from mainframe.store.work.budget import Budget
from mainframe.store.work.intake import ScanSpec, Submitted
from mainframe.store.work.queries import ListingFilter
from mainframe.store.work.results import Completion, ItemOutcome

__all__ = [
    "API",
    "BOARD",
    "CLI",
    "CONSECUTIVE_FAILURES",
    "ENDED_KEPT_US",
    "HOUR_US",
    "MINUTE_US",
    "OPERATOR",
    "SECRET_UNREADABLE",
    "SERVER_BUSY_MS",
    "Action",
    "Activity",
    "AuditEntry",
    "Bar",
    "Budget",
    "CausePage",
    "CauseSummary",
    "Closed",
    "Completion",
    "Conflict",
    "Database",
    "DeadLetter",
    "DeadLetterFilter",
    "DeadLetterPage",
    "DeliveryTotals",
    "Due",
    "EndpointCard",
    "EndpointView",
    "Forbidden",
    "HookTarget",
    "HookView",
    "Hooks",
    "Invalid",
    "ItemOutcome",
    "Job",
    "LastSubmission",
    "ListingFilter",
    "NotFound",
    "Origin",
    "Overview",
    "PausedQueue",
    "Presented",
    "Principal",
    "Progress",
    "Publish",
    "QueueChange",
    "Redriven",
    "Report",
    "ResultConflict",
    "Rotation",
    "ScanRecord",
    "ScanSpec",
    "Session",
    "Snapshot",
    "Stale",
    "Store",
    "StoreError",
    "Submitted",
    "TokenView",
    "Unauthorized",
    "Unavailable",
    "UnknownName",
    "WorkerHour",
    "create_store_engine",
    "current_revision",
    "digest",
    "discard",
    "head_revision",
    "is_known_revision",
    "is_sqlite",
    "open_database",
    "open_store",
    "session_policy",
    "set_role_defaults",
    "upgrade",
]


def open_database(
    url: str,
    *,
    clock: Clock | None = None,
    pool_size: int = 16,
    busy_timeout_ms: int = COMMAND_BUSY_MS,
    busy_wait: float = 5.0,
    policy: SessionPolicy | None = None,
) -> Database:
    """SQLite (a file, the process clock) or PostgreSQL (a pool, the database's clock; a
    clock given here is pinned on every connection instead, for tests)."""
    if is_sqlite(url):
        path = database_path(url)
        if path is None:
            raise ValueError("SQLite needs a file: in-memory databases are not shared")
        return SqliteDatabase(
            path, clock=clock, busy_timeout_ms=busy_timeout_ms, busy_wait=busy_wait
        )
    return PostgresDatabase(url, pool_size=pool_size, clock=clock, policy=policy)


def session_policy(settings: Settings) -> SessionPolicy:
    """How the server's PostgreSQL connections get the settings the store relies on."""
    timeout_ms = round(settings.statement_timeout_seconds * 1000)
    return SessionPolicy(
        settings.database_pooler,
        timeout_ms,
        settings.database_deadline_seconds,
        pooler_prepares=settings.database_pooler_prepares,
    )


def open_store(
    settings: Settings,
    *,
    clock: Clock | None = None,
    busy_timeout_ms: int = COMMAND_BUSY_MS,
) -> Store:
    """A Store on the configured database (the schema must already be at head)."""
    db = open_database(
        settings.database_url,
        clock=clock,
        pool_size=settings.pool_size,
        busy_timeout_ms=busy_timeout_ms,
        busy_wait=settings.busy_wait_seconds,
        policy=session_policy(settings),
    )
    budget = Budget.of(
        job_timeout=settings.job_timeout,
        max_attempts=settings.max_job_attempts,
        reap_per_poll=settings.reap_per_poll,
        max_wait=settings.max_wait_seconds,
        elsewhere=settings.retry_elsewhere_seconds,
    )
    retry = RetryPolicy(base=settings.retry_base_seconds, cap=settings.retry_max_seconds)
    key = settings.secret_key.get_secret_value() if settings.secret_key else None
    return Store.build(
        db,
        budget,
        retry=retry,
        clock=clock,
        hook_box=open_box(key, settings.database_url),
        rotation_grace_us=to_us(settings.hooks_rotation_grace_seconds),
        retention=settings.retention_policy(),
    )
