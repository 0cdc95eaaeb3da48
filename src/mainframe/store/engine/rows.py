"""Rows are read by column name: a dict per row on SQLite (`sqlite.py::SqliteRows`),
asyncpg's `Record` on PostgreSQL, both typed as `Row`, which takes a column's name and
nothing else. With
`MAINFRAME_STRICT_ROWS=1` (the test suite sets it) each driver builds rows that refuse a
position, a slice and iteration at run time too, so a read by position fails its test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, NoReturn, Protocol

import asyncpg


class Row(Protocol):
    """A row of a statement's result, read by column name."""

    def __getitem__(self, column: str, /) -> Any: ...

    def keys(self) -> Any: ...


def _refuse(what: object) -> NoReturn:
    raise TypeError(f"rows are read by column name, not by {what!r}")


class StrictDictRow(dict[str, Any]):
    def __getitem__(self, column: Any) -> Any:
        if not isinstance(column, str):
            _refuse(column)
        return super().__getitem__(column)

    def __iter__(self) -> Iterator[Any]:
        _refuse("iteration")


class StrictRecord(asyncpg.Record):  # type: ignore[misc]  # asyncpg ships no stubs
    def __getitem__(self, column: Any) -> Any:
        if not isinstance(column, str):
            _refuse(column)
        return super().__getitem__(column)

    def __iter__(self) -> Iterator[Any]:
        _refuse("iteration")


def strict() -> bool:
    """Whether rows refuse positions too; read when a connection opens."""
    return os.environ.get("MAINFRAME_STRICT_ROWS") == "1"


def pg_record() -> type[asyncpg.Record]:
    """The record class of a new PostgreSQL connection."""
    return StrictRecord if strict() else asyncpg.Record


def only(row: Row) -> Any:
    """The value of a row of one column, by that column's name."""
    [column] = list(row.keys())
    return row[column]
