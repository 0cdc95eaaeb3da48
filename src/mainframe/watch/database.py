"""The watcher's database connection: SQLite (one watcher host) or PostgreSQL (several
watchers share it). The watcher's own, so it never imports the server's store."""

from __future__ import annotations

from typing import Any

import psycopg
from sqlalchemy import Engine, create_engine, event

from mainframe.parsers import libpq_url

# A database host that cannot be reached fails the watcher's tick within this bound.
CONNECT_TIMEOUT_S = 5
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
    # The dialect only: libpq reads the URL itself, so a multi-host URL with
    # target_session_attrs finds the primary; no statement is kept prepared, so a pooler in
    # transaction pooling may hand each transaction any server connection.
    return create_engine(
        "postgresql+psycopg://",
        creator=lambda: psycopg.connect(
            libpq_url(url), connect_timeout=CONNECT_TIMEOUT_S, prepare_threshold=None
        ),
        isolation_level="READ COMMITTED",
    )


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
