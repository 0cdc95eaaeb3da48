"""The watcher's database connection: SQLite (one watcher host) or PostgreSQL (several
watchers share it). The watcher's own, so it never imports the server's store."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine, event

# WAL lets readers run beside the single writer; a busy file is waited on, not an error.
SQLITE_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=10000",
)


def create_watch_engine(url: str) -> Engine:
    """An engine with the transaction mode the watcher's SQL relies on (see state.py)."""
    if url.startswith("sqlite"):
        return _sqlite_engine(url)
    target = url
    if url.startswith("postgresql://"):
        target = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    return create_engine(target, isolation_level="READ COMMITTED")


def _sqlite_engine(url: str) -> Engine:
    engine = create_engine(url, connect_args={"check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take transaction control from the driver so BEGIN IMMEDIATE below is ours to issue.
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        for pragma in SQLITE_PRAGMAS:
            cursor.execute(pragma)
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # Every transaction takes the write lock up front: compare-and-set leases and the
        # atomic completion rely on writers being serialised.
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine
