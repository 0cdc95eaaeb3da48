"""Named statements and the one asynchronous transaction interface that runs them on either
database (sqlite.py, postgres.py), with the publication of a transaction's domain events
only after it commits, and what a store operation can refuse, in the lifecycle's words (the
shells map them to HTTP: web.py::refused).

A store call opens one transaction (`write`, `read`) or runs one autocommitted statement
(`single`, or `lookup` for a read), runs named statements through its `Tx`, appends what
changed to `tx.events`, and the database hands those to `publish` once the work is durable.
Work that may cross another transaction's locks goes through `transact`, which runs it again
when the database aborted it as a deadlock's victim.

Each statement is written out whole: its SQLite text and, where the dialects differ, its
PostgreSQL text beside it. Both use `:name` parameters; PostgreSQL (asyncpg) receives
them as `$1 … $n`, numbered once at import. Nothing is assembled at run time, and every
statement is registered by name, so `tests/unit/test_store_sql.py` can print them
all to a checked-in file where any change to the server's SQL shows up in a diff.

`mf_now()` is the deployment's clock in microseconds since the epoch: PostgreSQL's `now()`
(migration 0009), so every host of a fleet stamps and compares with one clock; on SQLite a
function the store registers, the server process's clock pinned for the transaction."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from mainframe.clock import rfc3339
from mainframe.lifecycle.rules import STALE_DETAIL, StaleCode
from mainframe.lifecycle.scans import Event
from mainframe.store.engine.rows import Row as Row
from mainframe.store.engine.rows import only

# `:name`, but not the second colon of a PostgreSQL `::type` cast.
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")

REGISTRY: dict[str, Sql] = {}


def numbered(text: str) -> tuple[str, tuple[str, ...]]:
    """`text` with `:name` parameters as `$1 … $n`, and the names in that order."""
    order: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        return f"${order.setdefault(match.group(1), len(order) + 1)}"

    return _PARAM.sub(number, text), tuple(order)


@dataclass(frozen=True, slots=True)
class Sql:
    """A named statement; `postgresql` is given only where it differs from `sqlite`."""

    name: str
    sqlite: str
    postgresql: str | None = None
    pg_text: str = field(init=False, repr=False, compare=False)
    pg_params: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        text, params = numbered(self.postgresql or self.sqlite)
        object.__setattr__(self, "pg_text", text)
        object.__setattr__(self, "pg_params", params)
        if REGISTRY.setdefault(self.name, self) is not self:
            raise ValueError(f"two statements are named {self.name!r}")

    def pg_args(self, params: Mapping[str, Any]) -> list[Any]:
        """The positional arguments of the PostgreSQL text, from named parameters."""
        return [params[name] for name in self.pg_params]

    def text(self, dialect: str) -> str:
        """The text a dialect runs (PostgreSQL's with numbered parameters)."""
        return self.sqlite if dialect == "sqlite" else self.pg_text


Publish = Callable[[Sequence[Event]], None]
NO_PARAMS: Mapping[str, Any] = {}

_in_transaction: ContextVar[bool] = ContextVar("mainframe_in_transaction", default=False)


def discard(_events: Sequence[Event]) -> None:
    return None


class Tx(Protocol):
    """One open transaction (or, under `single()`, one autocommitted statement at a time)."""

    dialect: str
    events: list[Event]
    # What spreads its outcome totals over their rows (lifecycle/scans.py::shard_of): drawn
    # afresh for each transaction on PostgreSQL, 0 on SQLite, which has one writer at a time.
    spread: int

    async def rows(self, sql: Sql, params: Mapping[str, Any] = NO_PARAMS) -> list[Row]: ...

    async def run(self, sql: Sql, params: Mapping[str, Any] = NO_PARAMS) -> int:
        """Run a statement without rows; return how many rows it changed."""
        ...

    async def many(self, sql: Sql, params: Sequence[Mapping[str, Any]]) -> None:
        """Run a statement without rows once per parameter set."""
        ...


T = TypeVar("T")


def record(kind: type[T], row: Row) -> T:
    """A `kind` (a NamedTuple or a dataclass) from the row's columns named as its fields."""
    shape: Any = kind  # a NamedTuple names its fields `_fields`, a dataclass its own way
    names = getattr(shape, "_fields", None) or tuple(shape.__dataclass_fields__)
    return kind(**{name: row[name] for name in names})


async def first(tx: Tx, sql: Sql, params: Mapping[str, Any] = NO_PARAMS) -> Row | None:
    """The first row of a statement, or None."""
    found = await tx.rows(sql, params)
    return found[0] if found else None


async def value(tx: Tx, sql: Sql, params: Mapping[str, Any] = NO_PARAMS) -> Any:
    """The one column of the first row of a statement, or None."""
    row = await first(tx, sql, params)
    return None if row is None else only(row)


@dataclass(frozen=True, slots=True)
class HostReport:
    """What a starting server logs about its database."""

    writable: bool
    not_in_force: dict[str, str]  # relied-on setting → the value found instead
    # Whether the transaction pooler keeps prepared statements; None: no such pooler.
    pooler_keeps_prepared: bool | None = None


class Database(Protocol):
    """Transactions on one database; events are published after a transaction commits."""

    dialect: str
    publish: Publish

    def write(self, *, lasting: bool = False) -> AbstractAsyncContextManager[Tx]:
        """A read-write transaction (an async context manager yielding a Tx). A lasting one
        (an operator's action over a whole endpoint) is bounded by the statement timeout, not
        the request deadline. The stores open it through `transact`, never directly."""
        ...

    def read(self) -> AbstractAsyncContextManager[Tx]:
        """A read-only transaction."""
        ...

    def single(self, *, lasting: bool = False) -> AbstractAsyncContextManager[Tx]:
        """For work that is one statement: autocommit on PostgreSQL, a write on SQLite; a
        lasting one as `write`'s."""
        ...

    def lookup(self) -> AbstractAsyncContextManager[Tx]:
        """For reads that are one statement: autocommit on PostgreSQL (no BEGIN and COMMIT
        round trips), a read transaction on SQLite (where `single` would take the writer's
        lock)."""
        ...

    def pool_counts(self) -> tuple[int, int, int]:
        """Connections in use and idle, and callers waiting for one."""
        ...

    async def ping(self) -> None:
        """One round trip (the readiness probe); ReadOnly when the host takes no writes."""
        ...

    async def host_report(self) -> HostReport:
        """Whether the host takes writes, and the relied-on settings not in force."""
        ...

    async def close(self) -> None: ...


@contextmanager
def outermost() -> Iterator[None]:
    """Refuse a store transaction opened inside another: on SQLite it would wait for itself."""
    if _in_transaction.get():
        raise RuntimeError("a store transaction was opened inside another one")
    token = _in_transaction.set(True)
    try:
        yield
    finally:
        _in_transaction.reset(token)


# What a store operation can refuse, in the lifecycle's words; the API maps them to HTTP.
class StoreError(Exception):
    code = "error"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class NotFound(StoreError):
    code = "not_found"


class Unauthorized(StoreError):
    code = "unauthorized"


class Forbidden(StoreError):
    """A known caller asking for what its role may not do."""

    code = "forbidden"


class Conflict(StoreError):
    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code


class Stale(Conflict):
    def __init__(self, code: StaleCode) -> None:
        super().__init__(code.value, STALE_DETAIL[code])
        self.stale_code = code


@dataclass(frozen=True, slots=True)
class Accepted:
    """The result that closed an assignment: its attempt's outcome, where it sent the scan,
    and when it was accepted."""

    outcome: str
    status: str
    fail_reason: str | None
    accepted_at: int


class ResultConflict(Stale):
    """The same assignment with other content than the accepted result (409)."""

    def __init__(self, accepted: Accepted) -> None:
        super().__init__(StaleCode.RESULT_CONFLICT)
        self.accepted = accepted
        settled = accepted.status + (f", {accepted.fail_reason}" if accepted.fail_reason else "")
        self.detail = (
            f"a different result closed this assignment: outcome {accepted.outcome}"
            f" (scan {settled}), accepted at {rfc3339(accepted.accepted_at)};"
            " nothing was changed"
        )


class Invalid(StoreError):
    code = "invalid_request"

    def __init__(self, field: str, detail: str) -> None:
        super().__init__(detail)
        self.field = field


class Unavailable(StoreError):
    """The database cannot serve the call now (locked, or unreachable); try again shortly."""

    def __init__(self, code: str, detail: str, *, retry_after: int = 1) -> None:
        super().__init__(detail)
        self.code = code
        self.retry_after = retry_after


class Contended(Unavailable):
    """The database aborted the transaction for a conflict with another one (a deadlock's
    victim, a serialization failure): it changed nothing, and run again it goes through."""

    def __init__(self) -> None:
        super().__init__("database_busy", "a concurrent transaction got in the way; try again")


class ReadOnly(Unavailable):
    """The database host takes no writes (a standby, or a primary being failed over)."""

    def __init__(self) -> None:
        super().__init__(
            "database_unavailable",
            "the database host is read-only (a standby, or a failover in progress); try again",
            retry_after=2,
        )


# Two server processes' transactions can cross on rows both write (a scan one reaps while
# another closes it, the outcome totals of one shard); PostgreSQL then aborts one of them.
# Neither did anything wrong, and the one aborted changed nothing, so it runs again.
CONTENDED_RETRIES = 2


async def again(send: Callable[[], Awaitable[T]], times: int, victim: type[Exception]) -> T:
    """`send()`'s outcome, sent again up to `times` more times while it fails with `victim`."""
    for _ in range(times):
        try:
            return await send()
        except victim:
            pass
    return await send()


async def transact(db: Database, work: Callable[[Tx], Awaitable[T]], *, lasting: bool = False) -> T:
    """`work` in one read-write transaction, run again from its start (a fresh transaction)
    when the database aborted it as a conflict's victim; `work` keeps its effects in the
    transaction (its statements and `tx.events`), so a run that was aborted leaves none."""

    async def once() -> T:
        async with db.write(lasting=lasting) as tx:
            return await work(tx)

    return await again(once, CONTENDED_RETRIES, Contended)
