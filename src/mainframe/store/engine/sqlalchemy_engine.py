"""SQLAlchemy engines for the schema's migrations and for tools and tests that read the
database directly. The server's store runs on store/engine/database.py, not on these."""

from __future__ import annotations

from typing import Any

import psycopg
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url

from mainframe.parsers import libpq_url
from mainframe.store.engine.postgres import CONNECT_TIMEOUT_S
from mainframe.store.engine.sqlite import BEGIN_WRITE, COMMAND_BUSY_MS, PRAGMAS


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def sqlalchemy_url(url: str) -> str:
    """Map the user-facing URL onto the driver Mainframe uses for it."""
    if url.startswith("postgresql://"):
        return "postgresql+psycopg://" + url.removeprefix("postgresql://")
    return url


def create_store_engine(
    url: str, *, pool_size: int = 8, busy_timeout_ms: int = COMMAND_BUSY_MS
) -> Engine:
    """An engine with the pragmas and transaction mode each database needs."""
    target = sqlalchemy_url(url)
    if is_sqlite(target):
        return _sqlite_engine(target, busy_timeout_ms)
    return create_engine(
        # The dialect only: libpq reads the URL itself (below), multi-host form included,
        # which SQLAlchemy's URL parser refuses.
        "postgresql+psycopg://",
        creator=lambda: connect_libpq(url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=False,
        pool_recycle=3600,
        isolation_level="READ COMMITTED",
    )


def connect_libpq(url: str) -> psycopg.Connection[Any]:
    """A psycopg connection to the URL as libpq reads it (hosts, `target_session_attrs`)."""
    return psycopg.connect(
        libpq_url(url),
        # An unreachable host fails within this bound, never hangs the command.
        connect_timeout=int(CONNECT_TIMEOUT_S),
        # Never keep a prepared statement: behind a pooler in transaction pooling, the next
        # transaction may run on a server connection that does not have it.
        prepare_threshold=None,
    )


def _sqlite_engine(target: str, busy_timeout_ms: int) -> Engine:
    # The driver's timeout is SQLite's busy timeout: how long a statement waits on a locked file.
    engine = create_engine(
        target, connect_args={"check_same_thread": False, "timeout": busy_timeout_ms / 1000}
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take transaction control from the driver so BEGIN IMMEDIATE below is ours to issue.
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        for pragma in PRAGMAS:
            cursor.execute(pragma)
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # Transactions take the write lock up front (BEGIN IMMEDIATE), so busy_timeout applies
        # instead of a deadlock error when two readers both try to upgrade.
        conn.exec_driver_sql(BEGIN_WRITE)

    return engine


def database_path(url: str) -> str | None:
    """The file behind a SQLite URL, or None for other databases and in-memory SQLite."""
    if not is_sqlite(url):
        return None
    parsed = make_url(sqlalchemy_url(url))
    if not parsed.drivername.startswith("sqlite") or parsed.database in (None, "", ":memory:"):
        return None
    return parsed.database
