"""The unit of work: one transaction per store call, the domain events it produced, and their
publication only after it commits. Every role of the store runs its statements through one.

SQLite keeps one connection for the process (store calls run inline on the event loop, one
writer per file anyway) and opens writes with BEGIN IMMEDIATE, so busy_timeout applies
instead of a deadlock when two readers both try to upgrade, and reads with a deferred BEGIN,
so a reader never takes the write lock. PostgreSQL checks a connection out of the pool per
call (calls run on a thread each)."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine

from mainframe.clock import Clock, SystemClock
from mainframe.lifecycle.events import Event
from mainframe.store.sql import Sql

Publish = Callable[[Sequence[Event]], None]


def discard(_events: Sequence[Event]) -> None:
    return None


class Tx:
    """One open transaction: SQLAlchemy Core for cold paths, the driver for fixed hot SQL."""

    __slots__ = ("_driver", "conn", "dialect", "events")

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.dialect = conn.dialect.name
        self.events: list[Event] = []
        self._driver: Any = conn.connection.driver_connection

    def rows(self, sql: Sql, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """Run a fixed statement through the driver and return its rows."""
        cursor = self._driver.execute(sql.text(self.dialect), params)
        found: list[tuple[Any, ...]] = cursor.fetchall() if cursor.description else []
        return found

    def first(self, sql: Sql, params: Mapping[str, Any]) -> tuple[Any, ...] | None:
        found = self.rows(sql, params)
        return found[0] if found else None

    def many(self, sql: Sql, params: Sequence[Mapping[str, Any]]) -> None:
        """Run a fixed statement without RETURNING once per parameter set (executemany)."""
        if params:
            self._driver.cursor().executemany(sql.text(self.dialect), params)


class UnitOfWork:
    def __init__(
        self,
        engine: Engine,
        *,
        clock: Clock | None = None,
        publish: Publish = discard,
        rng: random.Random | None = None,
    ) -> None:
        self.engine = engine
        self.clock = clock or SystemClock()
        self.publish = publish
        self.rng = rng or random.Random()
        self.sqlite = engine.dialect.name == "sqlite"
        self._pinned: Connection | None = None
        # Re-entrant so a nested call fails loudly in begin() instead of deadlocking.
        self._lock = threading.RLock()

    def now(self) -> int:
        return self.clock.now_us()

    @contextmanager
    def write(self) -> Iterator[Tx]:
        """A read-write transaction; its events are published once it has committed."""
        with self._transaction("BEGIN IMMEDIATE") as tx:
            yield tx
        if tx.events:
            self.publish(tx.events)

    @contextmanager
    def single(self) -> Iterator[Tx]:
        """For work whose writes are one statement: PostgreSQL runs it in autocommit, which
        saves the BEGIN and COMMIT round trips; SQLite takes an ordinary write transaction.
        Its events, too, are published only once the statement has committed."""
        if self.sqlite:
            with self.write() as tx:
                yield tx
            return
        with self.engine.connect() as conn:
            driver: Any = conn.connection.driver_connection
            driver.autocommit = True
            try:
                tx = Tx(conn)
                yield tx
            finally:
                driver.autocommit = False
        if tx.events:
            self.publish(tx.events)

    @contextmanager
    def read(self) -> Iterator[Tx]:
        """A read-only transaction (deferred on SQLite: it never takes the write lock)."""
        with self._transaction("BEGIN") as tx:
            yield tx

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[Tx]:
        if not self.sqlite:
            with self.engine.connect() as conn, conn.begin():
                yield Tx(conn)
            return
        with self._lock:
            conn = self._sqlite_connection()
            conn.info["begin"] = begin
            try:
                with conn.begin():
                    yield Tx(conn)
            except BaseException:
                # A failed BEGIN or COMMIT can leave the connection unusable; start afresh.
                if conn.invalidated or conn.closed:
                    self._pinned = None
                raise

    def _sqlite_connection(self) -> Connection:
        if self._pinned is None or self._pinned.closed:
            self._pinned = self.engine.connect()
        return self._pinned

    def dispose(self) -> None:
        with self._lock:
            if self._pinned is not None:
                self._pinned.close()
                self._pinned = None
        self.engine.dispose()
