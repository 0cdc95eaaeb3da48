"""How route handlers call the synchronous store without stalling the event loop.

SQLite runs inline on the loop: one process has one writer anyway, statements take
microseconds, and a thread hop per call would cost more than the query. A locked file (a CLI
command, a backup or another process holding the write lock) blocks a statement for at most
the engine's short busy timeout; the call is then retried after an asynchronous sleep, so
other requests go on, and answers 503 `database_busy` once `busy_wait` has passed.
PostgreSQL calls go to a bounded thread pool the size of the connection pool, so waits on
the network overlap; a database that cannot be reached answers 503 `database_unavailable`."""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import anyio
import anyio.to_thread
import psycopg
from sqlalchemy.exc import DBAPIError, OperationalError

from mainframe.store.errors import Unavailable

P = ParamSpec("P")
T = TypeVar("T")

# PostgreSQL calls rolled back by a deadlock or serialisation failure are run again this often.
TRANSIENT_RETRIES = 3
# Pauses between attempts on a locked SQLite file: short first, then a steady poll.
BUSY_PAUSES = (0.005, 0.01, 0.02, 0.05, 0.1)


def is_busy(exc: BaseException) -> bool:
    """A SQLite 'database is locked' (or 'busy') error, raw or wrapped by SQLAlchemy."""
    inner = exc.orig if isinstance(exc, DBAPIError) else exc
    return isinstance(inner, sqlite3.OperationalError) and (
        "locked" in str(inner) or "busy" in str(inner)
    )


class StoreRunner:
    def __init__(self, *, inline: bool, threads: int, busy_wait: float = 5.0) -> None:
        self.inline = inline
        self.busy_wait = busy_wait
        self._limiter = anyio.CapacityLimiter(threads)
        self._lock = threading.Lock()
        self._in_flight = 0

    async def __call__(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        if self.inline:
            return await self._inline(functools.partial(fn, *args, **kwargs))
        call = functools.partial(self._counted, functools.partial(fn, *args, **kwargs))
        for tried in range(TRANSIENT_RETRIES + 1):
            try:
                return await anyio.to_thread.run_sync(call, limiter=self._limiter)
            except psycopg.errors.TransactionRollback:
                # A deadlock or serialisation failure rolled the call back; run it again.
                if tried == TRANSIENT_RETRIES:
                    raise
            except (OperationalError, psycopg.OperationalError) as exc:
                raise Unavailable("database_unavailable", "the database cannot be reached") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _counted(self, call: Callable[[], T]) -> T:
        # Counted in the thread itself: a call whose awaiting task was cancelled still holds
        # a connection until the thread returns.
        with self._lock:
            self._in_flight += 1
        try:
            return call()
        finally:
            with self._lock:
                self._in_flight -= 1

    async def settle(self, timeout: float = 10.0) -> bool:
        """Wait until no store call runs on a thread (before the engine is disposed, so no
        connection is checked in to a discarded pool); False if `timeout` passed first."""
        deadline = time.monotonic() + timeout
        while self._in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        return not self._in_flight

    async def _inline(self, call: Callable[[], T]) -> T:
        deadline = time.monotonic() + self.busy_wait
        tried = 0
        while True:
            try:
                return call()
            except (sqlite3.OperationalError, OperationalError) as exc:
                # A failed call rolled back and published nothing, so it is safe to repeat.
                if not is_busy(exc):
                    raise
                if time.monotonic() >= deadline:
                    raise Unavailable(
                        "database_busy",
                        f"the database file stayed locked for {self.busy_wait:g} s",
                    ) from exc
            await asyncio.sleep(BUSY_PAUSES[min(tried, len(BUSY_PAUSES) - 1)])
            tried += 1
