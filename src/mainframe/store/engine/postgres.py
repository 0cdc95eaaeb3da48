"""PostgreSQL, the scale-out engine: several server processes or hosts share it. The store
runs on the event loop through asyncpg, with no thread per call; every statement is a
server-side prepared statement asyncpg caches per connection. `single()` runs one statement
in autocommit (no BEGIN or COMMIT round trips), and the hot paths are written so that one
statement does their whole work. `mf_now()` is the database's clock; a test may pin it
through the session setting `mainframe.clock_us`, which production never sets.

Connections come from a small last-in-first-out pool of its own: taking and giving back a
connection is a list operation, where asyncpg's pool spends a task, a timeout and (by
default) a reset query on every release: about 60 µs and one round trip per request here.

Behind a pooler (`MAINFRAME_DATABASE_POOLER`, docs/scale-out.md) a connection sends only the startup
parameters a pooler passes on; in session pooling the session settings follow as one SET after
connecting, and in transaction pooling, where nothing outlives a transaction, no statement is kept
prepared and the settings come from the database (`mainframe db upgrade` sets them on the role,
`store/engine/pg_settings.py`). A host that turns out to be read-only (a standby, a demoted primary)
answers 503 and its connection is dropped, so the next connection looks for the read-write host
again (libpq's `target_session_attrs`, which asyncpg reads too).

Every call's work has a deadline (`MAINFRAME_DATABASE_DEADLINE_SECONDS`), the link included:
a link that hangs (a pooler that stopped relaying, a partitioned path) never answers and never
fails, and neither TCP keepalives nor `statement_timeout` fire while something in between keeps
acknowledging. Past the deadline the call's connection is closed under it, so whatever it
awaited fails at once, and the call answers 503 with `Retry-After`; waiting for a connection
and opening one are bounded by the same deadline."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import secrets
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import asyncpg
import orjson

from mainframe.clock import Clock
from mainframe.lifecycle.scans import Event
from mainframe.parsers import libpq_url
from mainframe.store.engine.database import (
    NO_PARAMS,
    Contended,
    HostReport,
    Invalid,
    Publish,
    ReadOnly,
    Row,
    Sql,
    StoreError,
    Unavailable,
    again,
    discard,
    outermost,
)
from mainframe.store.engine.pg_functions import Functions
from mainframe.store.engine.pg_settings import SessionPolicy, host_writable, settings_found
from mainframe.store.engine.rows import pg_record
from mainframe.store.engine.statements import statement

PIN_CLOCK = statement("pin_clock")
SESSION_SETTINGS = statement("session_settings")
PREPARED_NAMES = statement("prepared_names")
DEALLOCATE = statement("deallocate").pg_text

# A host that cannot be reached fails a request within this bound (then 503), never hangs it.
CONNECT_TIMEOUT_S = 5.0
# Prepared statements asyncpg keeps per connection: every named statement, with room.
STATEMENT_CACHE = 512
# Errors that mean the database cannot serve the call now, not that the call is wrong. The
# client-side ones are a connection left mid-operation by a link that failed under it (seen
# while PostgreSQL restarts): it is closed, and the call answered 503 like the others.
UNREACHABLE: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
)

# A write sent to a host that is not (or no longer) the primary.
READ_ONLY: tuple[type[BaseException], ...] = (
    asyncpg.exceptions.ReadOnlySQLTransactionError,
    asyncpg.exceptions.TargetServerAttributeNotMatched,
)

Setup = Callable[[asyncpg.Connection], Awaitable[None]]
T = TypeVar("T")


def asyncpg_dsn(url: str) -> str:
    """The user-facing URL as asyncpg takes it (it knows no driver suffix)."""
    return libpq_url(url)


# A statement sent on its own that PostgreSQL aborted as a deadlock's victim changed nothing,
# and the transaction it met has gone on: sent again, it runs as if it had come a moment
# later. Two server processes' statements can cross on rows both write (the outcome totals of
# one shard, a scan two copies of one result name); neither did anything wrong.
DEADLOCK_RETRIES = 2


class PgTx:
    __slots__ = ("_conn", "_functions", "alone", "dialect", "events", "spread")

    def __init__(
        self, conn: asyncpg.Connection, functions: Functions | None = None, *, alone: bool = False
    ) -> None:
        self._conn = conn
        self._functions = functions  # transaction pooling: statements that return rows
        self.alone = alone  # each statement commits on its own (`single`)
        self.dialect = "postgresql"
        self.events: list[Event] = []
        # At random, not by the backend's process id: two server processes open their pools in
        # blocks of consecutive ids, so by id the connections each uses most (its pool hands out
        # the last one given back) could share a totals row with another's for good, and their
        # results would wait on each other's commits (docs/scale-out.md,
        # *Outcome totals without a queue of writers*).
        self.spread: int = random.getrandbits(16)

    async def rows(self, sql: Sql, params: Mapping[str, Any] = NO_PARAMS) -> list[Row]:
        args = sql.pg_args(params)
        functions = self._functions
        if functions is not None:
            return await self._again(lambda: functions.rows(self._conn, sql, args))
        found: list[Row] = await self._again(lambda: self._conn.fetch(sql.pg_text, *args))
        return found

    async def run(self, sql: Sql, params: Mapping[str, Any] = NO_PARAMS) -> int:
        args = sql.pg_args(params)
        functions = self._functions
        if functions is not None:
            status = await self._again(lambda: functions.run(self._conn, sql.pg_text, args))
        else:
            status = await self._again(lambda: self._conn.execute(sql.pg_text, *args))
        last = status.rpartition(" ")[2]
        return int(last) if last.isdigit() else 0

    async def many(self, sql: Sql, params: Sequence[Mapping[str, Any]]) -> None:
        if not params:
            return
        args = [sql.pg_args(p) for p in params]
        functions = self._functions
        if functions is not None:
            await self._again(lambda: functions.many(self._conn, sql.pg_text, args))
        else:
            await self._again(lambda: self._conn.executemany(sql.pg_text, args))

    async def _again(self, send: Callable[[], Awaitable[T]]) -> T:
        """The statement's outcome; sent again when, alone, it was a deadlock's victim.
        Inside a transaction the whole transaction is lost, so the error goes to the caller."""
        if not self.alone:
            return await send()
        return await again(send, DEADLOCK_RETRIES, asyncpg.exceptions.DeadlockDetectedError)


class Watch:
    """One call's deadline: past it, the connection the call holds is closed under it (a call
    waiting on a hung link fails at once), a call still waiting for a connection stops
    waiting, and `expired` says why it failed. One timer, no task cancelled: Python 3.11's
    `asyncio.wait_for` can swallow a cancellation that races with its result."""

    __slots__ = ("_handle", "conn", "expired", "seconds", "until", "waiter")

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.conn: asyncpg.Connection | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.expired = False
        self._handle: asyncio.TimerHandle | None = None
        self.until = float("inf")
        if seconds is not None:
            loop = asyncio.get_running_loop()
            self.until = loop.time() + seconds
            self._handle = loop.call_at(self.until, self._expire)

    def left(self) -> float:
        """Seconds left before the deadline (infinity without one)."""
        return self.until - asyncio.get_running_loop().time()

    def _expire(self) -> None:
        self.expired = True
        if self.conn is not None:
            self.conn.terminate()
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(TimeoutError("no connection came free in time"))

    def done(self) -> None:
        if self._handle is not None:
            self._handle.cancel()


class Connections:
    """Up to `size` connections, the most recently used handed out first; a broken one (or
    one a cancelled call left mid-statement) is closed and replaced on demand."""

    def __init__(
        self,
        dsn: str,
        size: int,
        *,
        setup: Setup | None = None,
        policy: SessionPolicy | None = None,
    ) -> None:
        self.dsn = dsn
        self.size = size
        self.setup = setup
        self.policy = policy or SessionPolicy()
        self._idle: list[asyncpg.Connection] = []
        self._open = 0
        self._waiting: deque[asyncio.Future[None]] = deque()

    def counts(self) -> tuple[int, int, int]:
        """Connections in use and idle, and callers waiting for one (the pool's gauges)."""
        idle = len(self._idle)
        return self._open - idle, idle, len(self._waiting)

    async def acquire(self, watch: Watch) -> asyncpg.Connection:
        while True:
            while self._idle:
                conn = self._idle.pop()
                if not conn.is_closed():
                    return await self._ready(conn, watch)
                self._open -= 1
            if self._open < self.size:
                return await self._ready(await self._connect(watch), watch)
            await self._wait(watch)

    async def _connect(self, watch: Watch) -> asyncpg.Connection:
        self._open += 1
        try:
            conn: asyncpg.Connection = await asyncpg.connect(
                self.dsn,
                timeout=max(0.0, min(CONNECT_TIMEOUT_S, watch.left())),
                # Transaction pooling hands each transaction any server connection, where a
                # statement prepared by another would be missing or named twice.
                statement_cache_size=STATEMENT_CACHE if self.policy.prepares else 0,
                server_settings=self.policy.startup(),
                record_class=pg_record(),
            )
            if self.policy.sets_after_connect():
                settings = orjson.dumps(self.policy.role_defaults()).decode()
                await conn.execute(SESSION_SETTINGS.pg_text, settings)
        except BaseException:
            self._open -= 1
            self._wake()
            raise
        return conn

    async def _ready(self, conn: asyncpg.Connection, watch: Watch) -> asyncpg.Connection:
        watch.conn = conn
        if watch.expired:  # it ran out while this connection was being opened
            conn.terminate()
        if self.setup is not None:
            try:
                await self.setup(conn)
            except BaseException:
                self.discard(conn)
                raise
        return conn

    async def _wait(self, watch: Watch) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        watch.waiter = waiter
        try:
            await waiter
        except BaseException:
            # Cancelled after being woken: the turn goes to the next in line.
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._wake()
            raise
        finally:
            watch.waiter = None

    def release(self, conn: asyncpg.Connection) -> None:
        if conn.is_closed() or conn.is_in_transaction():
            self.discard(conn)
            return
        self._idle.append(conn)
        self._wake()

    def discard(self, conn: asyncpg.Connection) -> None:
        conn.terminate()
        self._open -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            self._open -= 1
            try:
                await asyncio.wait_for(conn.close(), CONNECT_TIMEOUT_S)
            except (*UNREACHABLE, asyncpg.InterfaceError):
                conn.terminate()


def _unreachable(watch: Watch) -> Unavailable:
    if watch.expired or watch.left() <= 0:
        return Unavailable(
            "database_unavailable", f"the database did not answer within {watch.seconds:g} s"
        )
    return Unavailable("database_unavailable", "the database cannot be reached")


class PostgresDatabase:
    dialect = "postgresql"

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 16,
        clock: Clock | None = None,
        publish: Publish = discard,
        policy: SessionPolicy | None = None,
    ) -> None:
        # clock None: the database's own. A test clock is pinned at every checkout instead.
        self.clock = clock
        self.publish = publish
        self.policy = policy or SessionPolicy()
        # The bounds on one call's work, worked out once (seconds; None: none).
        self._deadlines = {False: self.policy.deadline(), True: self.policy.deadline(lasting=True)}
        # Without prepared statements (transaction pooling), rows come from functions.
        self._functions = None if self.policy.prepares else Functions()
        setup = self._pin_clock if clock is not None else None
        self._connections = Connections(
            asyncpg_dsn(url), pool_size, setup=setup, policy=self.policy
        )

    def pool_counts(self) -> tuple[int, int, int]:
        """Connections in use and idle, and callers waiting for one."""
        return self._connections.counts()

    async def _pin_clock(self, conn: asyncpg.Connection) -> None:
        assert self.clock is not None
        await conn.execute(PIN_CLOCK.pg_text, *PIN_CLOCK.pg_args({"now": str(self.clock.now_us())}))

    @asynccontextmanager
    async def _connection(self, *, lasting: bool = False) -> AsyncIterator[asyncpg.Connection]:
        with outermost():
            watch = Watch(self._deadlines[lasting])
            try:
                conn = await self._connections.acquire(watch)
                try:
                    yield conn
                except (StoreError, asyncpg.PostgresError) as exc:
                    # A refusal, or a statement the database refused (it answered in full):
                    # the connection is as good as before, unless it is the link that failed
                    # or a host that cannot take writes (the next connection looks again).
                    if isinstance(exc, (*UNREACHABLE, *READ_ONLY, ReadOnly)):
                        self._connections.discard(conn)
                    else:
                        self._connections.release(conn)
                    raise
                except BaseException:
                    # Anything else (a cancelled call, a broken link, a client-side error) may
                    # have left a statement half done on it.
                    self._connections.discard(conn)
                    raise
                self._connections.release(conn)
            except READ_ONLY as exc:
                raise ReadOnly() from exc
            except asyncpg.exceptions.QueryCanceledError as exc:
                # statement_timeout (or an operator's cancel): the database gave up on it.
                raise Unavailable(
                    "database_busy", "a statement ran past its time limit; try again"
                ) from exc
            except UNREACHABLE as exc:
                raise _unreachable(watch) from exc
            except asyncpg.exceptions.DataError as exc:
                # The statements are fixed, so a value PostgreSQL refuses to store or compare
                # (a NUL, a number out of range) came from the request: a 422, never a 500.
                raise Invalid("request", f"a value the database refuses: {exc}") from exc
            except asyncpg.exceptions.TransactionRollbackError as exc:
                raise Contended() from exc
            finally:
                watch.done()

    @asynccontextmanager
    async def write(self, *, lasting: bool = False) -> AsyncIterator[PgTx]:
        async with self._connection(lasting=lasting) as conn, conn.transaction():
            tx = PgTx(conn, self._functions)
            yield tx
        if tx.events:
            self.publish(tx.events)

    @asynccontextmanager
    async def single(self, *, lasting: bool = False) -> AsyncIterator[PgTx]:
        async with self._connection(lasting=lasting) as conn:
            tx = PgTx(conn, self._functions, alone=True)
            yield tx
        if tx.events:
            self.publish(tx.events)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[PgTx]:
        async with self._connection() as conn, conn.transaction(readonly=True):
            yield PgTx(conn, self._functions)

    lookup = single

    async def ping(self) -> None:
        async with self.single() as tx:
            if not await host_writable(tx):
                raise ReadOnly()

    async def host_report(self) -> HostReport:
        # The pooler first: through one that drops prepared statements, a connection that
        # assumed otherwise fails the statements after it.
        keeps = await self._pooler_keeps_prepared() if self.policy.pooler == "transaction" else None
        if keeps is not None and keeps != self.policy.pooler_prepares:
            await self._prepare_through_pooler(keeps)
        async with self.single() as tx:
            writable, unset = await host_writable(tx), await settings_found(tx, self.policy)
        return HostReport(writable, unset, keeps)

    async def _pooler_keeps_prepared(self) -> bool:
        """Whether the pooler keeps prepared statements in transaction pooling: one that does
        (PgBouncer 1.21 and later with max_prepared_statements) prepares a client's statement
        on the server under a name of its own; one that does not passes the name through. The
        statement looks for its own name, prepared and run in one transaction, so on one
        server connection."""
        name = f"mf_probe_{secrets.token_hex(8)}"
        async with self._connection() as conn, conn.transaction():
            probe = await conn.prepare(PREPARED_NAMES.pg_text, name=name)
            [row] = await probe.fetch(*PREPARED_NAMES.pg_args({"name": name}))
            passed_through = bool(row["found"])
            if passed_through:  # on a server connection other clients get next: gone again
                await conn.execute(DEALLOCATE.format(name=name))
        return not passed_through

    async def _prepare_through_pooler(self, keeps: bool) -> None:
        """Keep prepared statements through a pooler that keeps them, as directly; send rows
        through functions through one that does not, whatever the setting assumed (statements
        missing from the next server connection would fail request after request)."""
        self.policy = dataclasses.replace(self.policy, pooler_prepares=keeps)
        self._functions = None if keeps else Functions()
        self._connections.policy = self.policy
        await self._connections.close()  # the idle ones were opened for the other way

    async def close(self) -> None:
        await self._connections.close()
