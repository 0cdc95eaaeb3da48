"""One asynchronous transaction interface over the two databases (sqlite.py, postgres.py), and
the publication of a transaction's domain events only after it commits.

A store call opens one transaction (`write`, `read`) or runs one autocommitted statement
(`single`), runs named statements through its `Tx`, appends what changed to `tx.events`, and
the database hands those to `publish` once the work is durable. `mf_now()` in a statement
is the deployment's clock (store/sql.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol

from mainframe.lifecycle.events import Event
from mainframe.store.sql import Sql

Row = Sequence[Any]
Publish = Callable[[Sequence[Event]], None]
NO_PARAMS: Mapping[str, Any] = {}

_in_transaction: ContextVar[bool] = ContextVar("mainframe_in_transaction", default=False)


def discard(_events: Sequence[Event]) -> None:
    return None


class Tx(Protocol):
    """One open transaction (or, under `single()`, one autocommitted statement at a time)."""

    dialect: str
    events: list[Event]
    # The database session it runs in: PostgreSQL's backend process id, 0 on SQLite.
    session: int

    async def rows(self, sql: Sql, params: Mapping[str, Any] = NO_PARAMS) -> list[Row]: ...

    async def run(self, sql: Sql, params: Mapping[str, Any] = NO_PARAMS) -> int:
        """Run a statement without rows; return how many rows it changed."""
        ...

    async def many(self, sql: Sql, params: Sequence[Mapping[str, Any]]) -> None:
        """Run a statement without rows once per parameter set."""
        ...


async def first(tx: Tx, sql: Sql, params: Mapping[str, Any] = NO_PARAMS) -> Row | None:
    """The first row of a statement, or None."""
    found = await tx.rows(sql, params)
    return found[0] if found else None


async def value(tx: Tx, sql: Sql, params: Mapping[str, Any] = NO_PARAMS) -> Any:
    """The first column of the first row of a statement, or None."""
    row = await first(tx, sql, params)
    return None if row is None else row[0]


class Database(Protocol):
    """Transactions on one database; events are published after a transaction commits."""

    dialect: str
    publish: Publish

    def write(self) -> Any:
        """A read-write transaction (an async context manager yielding a Tx)."""
        ...

    def read(self) -> Any:
        """A read-only transaction."""
        ...

    def single(self) -> Any:
        """For work that is one statement: autocommit on PostgreSQL, a write on SQLite."""
        ...

    def pool_counts(self) -> tuple[int, int, int]:
        """Connections in use and idle, and callers waiting for one."""
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
