"""SQLite, the embedded default: one file, one connection per process, run inline on the event
loop (statements take microseconds; a thread hop per call would cost more than the query).

An asyncio lock keeps one transaction on the connection at a time. Writes begin with BEGIN
IMMEDIATE, so a file locked by another process (a CLI command, a backup) is met at the
BEGIN, which is retried after an asynchronous sleep (other requests go on) until `busy_wait`
has passed, then answered `503 database_busy`; reads begin deferred and never take the write
lock. `mf_now()` answers the process clock, read once when the transaction begins (SQLite is
one host, so one clock)."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from mainframe.clock import Clock, SystemClock
from mainframe.lifecycle.scans import Event
from mainframe.store.engine.database import (
    NO_PARAMS,
    HostReport,
    Publish,
    Row,
    Sql,
    Unavailable,
    discard,
    outermost,
)
from mainframe.store.engine.rows import StrictDictRow, strict
from mainframe.store.engine.statements import statement

PRAGMAS = tuple(statement("connection_pragmas").sqlite.split(";\n"))
BEGIN_WRITE = statement("begin_write").sqlite
BEGIN_READ = statement("begin_read").sqlite
COMMIT = statement("commit").sqlite
ROLLBACK = statement("rollback").sqlite
PING = statement("ping")
# How long one statement blocks on a locked file: commands (the CLI) wait long; the server
# waits briefly and retries the BEGIN after an asynchronous sleep.
COMMAND_BUSY_MS = 10_000
SERVER_BUSY_MS = 50
# Pauses between BEGINs on a locked file: short first, then a steady poll.
BUSY_PAUSES = (0.005, 0.01, 0.02, 0.05, 0.1)


class SqliteRows:
    """SQLite's row factory: each row a dict of its columns by name, the names read once per
    statement. (`sqlite3.Row` finds a name by a case-blind scan of the columns: reading a whole
    scan's 28 by name cost 5 µs a row against 2 µs for the dict.)"""

    def __init__(self, strict: bool) -> None:
        self._make: type[dict[str, Any]] = StrictDictRow if strict else dict
        self._description: Any = None
        self._names: tuple[str, ...] = ()

    def __call__(self, cursor: sqlite3.Cursor, values: tuple[Any, ...]) -> dict[str, Any]:
        description = cursor.description
        if description is not self._description:
            self._description = description
            self._names = tuple(column[0] for column in description)
        return self._make(zip(self._names, values, strict=True))


class SqliteTx:
    __slots__ = ("_conn", "dialect", "events", "spread")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self.dialect = "sqlite"
        self.events: list[Event] = []
        self.spread = 0

    async def rows(self, sql: Sql, params: Mapping[str, Any] = NO_PARAMS) -> list[Row]:
        return self._conn.execute(sql.sqlite, params).fetchall()

    async def run(self, sql: Sql, params: Mapping[str, Any] = NO_PARAMS) -> int:
        return self._conn.execute(sql.sqlite, params).rowcount

    async def many(self, sql: Sql, params: Sequence[Mapping[str, Any]]) -> None:
        if params:
            self._conn.executemany(sql.sqlite, params)


def is_busy(exc: BaseException) -> bool:
    """A SQLite 'database is locked' (or 'busy') error."""
    return isinstance(exc, sqlite3.OperationalError) and (
        "locked" in str(exc) or "busy" in str(exc)
    )


class SqliteDatabase:
    dialect = "sqlite"

    def __init__(
        self,
        path: str,
        *,
        clock: Clock | None = None,
        publish: Publish = discard,
        busy_timeout_ms: int = COMMAND_BUSY_MS,
        busy_wait: float = 5.0,
    ) -> None:
        self.path = path
        self.clock = clock or SystemClock()
        self.publish = publish
        self.busy_timeout_ms = busy_timeout_ms
        self.busy_wait = busy_wait
        self._conn: sqlite3.Connection | None = None
        self._lock = asyncio.Lock()
        self._now: int | None = None
        self._waiting = 0

    def pool_counts(self) -> tuple[int, int, int]:
        """The one connection in use or idle, and callers waiting for it."""
        in_use = int(self._lock.locked())
        idle = int(self._conn is not None) - in_use
        return in_use, max(idle, 0), self._waiting

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            # isolation_level=None: the driver issues no BEGIN of its own; ours are explicit.
            conn = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=self.busy_timeout_ms / 1000,
            )
            conn.row_factory = SqliteRows(strict())
            for pragma in PRAGMAS:
                conn.execute(pragma)
            conn.create_function("mf_now", 0, self._mf_now, deterministic=True)
            self._conn = conn
        return self._conn

    def _mf_now(self) -> int:
        return self._now if self._now is not None else self.clock.now_us()

    @asynccontextmanager
    async def write(self, *, lasting: bool = False) -> AsyncIterator[SqliteTx]:
        async with self._transaction(BEGIN_WRITE) as tx:
            yield tx
        if tx.events:
            self.publish(tx.events)

    single = write

    @asynccontextmanager
    async def read(self) -> AsyncIterator[SqliteTx]:
        async with self._transaction(BEGIN_READ) as tx:
            yield tx

    lookup = read

    @asynccontextmanager
    async def _transaction(self, begin: str) -> AsyncIterator[SqliteTx]:
        with outermost():
            self._waiting += 1
            try:
                await self._lock.acquire()
            finally:
                self._waiting -= 1
            try:
                conn = self._connection()
                await self._begin(conn, begin)
                self._now = self.clock.now_us()
                try:
                    yield SqliteTx(conn)
                    conn.execute(COMMIT)
                except BaseException as exc:
                    if conn.in_transaction:
                        conn.execute(ROLLBACK)
                    if is_busy(exc):
                        raise Unavailable("database_busy", "the database file is locked") from exc
                    raise
                finally:
                    self._now = None
            finally:
                self._lock.release()

    async def _begin(self, conn: sqlite3.Connection, begin: str) -> None:
        deadline = time.monotonic() + self.busy_wait
        for pause in itertools.chain(BUSY_PAUSES, itertools.repeat(BUSY_PAUSES[-1])):
            try:
                conn.execute(begin)
                return
            except sqlite3.OperationalError as exc:
                if not is_busy(exc):
                    raise
                if time.monotonic() >= deadline:
                    raise Unavailable(
                        "database_busy",
                        f"the database file stayed locked for {self.busy_wait:g} s",
                    ) from exc
            await asyncio.sleep(pause)

    async def ping(self) -> None:
        async with self.read() as tx:
            await tx.rows(PING)

    async def host_report(self) -> HostReport:
        return HostReport(True, {})  # a SQLite file is writable or the server does not start

    async def close(self) -> None:
        async with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
