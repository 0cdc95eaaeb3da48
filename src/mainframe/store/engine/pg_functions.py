"""Statements as server-side functions, for transaction pooling (docs/scale-out.md, *Behind
PgBouncer*). Through a pooler that hands each transaction any server connection, no prepared
statement survives, so a statement sent as text is parsed and planned on every call: for the
hot statements (a dozen CTEs) that costs the database more than running them. Sent instead as
a call of a PL/pgSQL function that runs the same text, only the call is parsed and planned;
PL/pgSQL keeps the statement's plan on each server connection, whichever client uses it next.

Each function is made on first use, by any server process, from the statement's own text: its
name carries a digest of that text (`mf_q_<statement>_<digest>`), so a changed statement gets a
function of its own and servers of two releases never fight over one. Its parameters take the
types PostgreSQL infers for the statement and it returns the statement's own columns, both
from one description of the statement, so its rows are read as the statement's would be.
Only statements that return rows are sent this way, and a function is made only by a
statement sent in autocommit (the hot paths), so none is made by a transaction that then
rolls back; until then a statement goes as text. The templates are the engine's statements
(`function_*`).

Without prepared statements asyncpg asks for a statement's description (Parse, Describe) and
then sends Parse, Bind and Execute: two round trips through the pooler a statement. Each
connection keeps the unnamed statement it was described, marked unprepared (asyncpg's own way
for PgBouncer), so every later call is the one round trip; only calls whose rows cannot change
shape go this way (a function's, whose name fixes its columns, and a statement's status), since
an unnamed statement's description is not asked again."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any
from weakref import WeakKeyDictionary

import asyncpg
from asyncpg.prepared_stmt import PreparedStatement

from mainframe.store.engine.database import Row, Sql
from mainframe.store.engine.statements import statement

LOCK = statement("function_lock")
ARITY = statement("function_arity")
DEFINITION = statement("function_definition")
TYPE_NAMES = statement("function_type_names")
CALL = statement("function_call")


def function_name(sql: Sql) -> str:
    # The definition's template is in the digest too: a function of another shape is another.
    made = f"{DEFINITION.pg_text}\n{sql.pg_text}"
    digest = hashlib.blake2b(made.encode(), digest_size=5).hexdigest()
    return f"mf_q_{sql.name}_{digest}"


class OneTrip:
    """Each connection's described statements, sent in one round trip a call."""

    def __init__(self) -> None:
        self._kept: WeakKeyDictionary[asyncpg.Connection, dict[str, PreparedStatement]] = (
            WeakKeyDictionary()
        )

    async def statement(self, conn: asyncpg.Connection, text: str) -> PreparedStatement:
        kept = self._kept.get(conn)
        if kept is None:
            kept = self._kept[conn] = {}
        found = kept.get(text)
        if found is None:
            found = kept[text] = await conn.prepare(text)
        return found


class Functions:
    """The calls of the statements made functions so far, by statement name."""

    def __init__(self) -> None:
        self._calls: dict[str, str] = {}
        self.trips = OneTrip()

    async def run(self, conn: asyncpg.Connection, text: str, args: list[Any]) -> str:
        """A statement run for its status (`UPDATE 3`), in one round trip."""
        if not args:  # the simple protocol: one round trip already
            done: str = await conn.execute(text)
            return done
        kept = await self.trips.statement(conn, text)
        await kept.fetch(*args)
        return kept.get_statusmsg() or ""

    async def many(self, conn: asyncpg.Connection, text: str, args: Sequence[list[Any]]) -> None:
        kept = await self.trips.statement(conn, text)
        await kept.executemany(args)

    async def rows(self, conn: asyncpg.Connection, sql: Sql, args: list[Any]) -> list[Row]:
        call = self._calls.get(sql.name)
        if call is None:
            if conn.is_in_transaction():
                # A function made inside a transaction that then rolls back would be gone.
                plain: list[Row] = await conn.fetch(sql.pg_text, *args)
                return plain
            call = await self._define(conn, sql)
        found: list[Row] = await (await self.trips.statement(conn, call)).fetch(*args)
        return found

    async def _define(self, conn: asyncpg.Connection, sql: Sql) -> str:
        name = function_name(sql)
        # One transaction, so a pooler keeps it on one server connection; the lock keeps two
        # servers from making the same function at once.
        async with conn.transaction():
            await conn.execute(LOCK.pg_text, name)
            [*made] = await conn.fetch(ARITY.pg_text, name)
            if made:
                arity = int(made[0]["arity"])
            else:
                described = await conn.prepare(sql.pg_text)
                types = await _type_names(conn, described.get_parameters())
                text = DEFINITION.pg_text.format(
                    function=name,
                    types=", ".join(types),
                    columns=await _columns(conn, sql, described.get_attributes()),
                    statement=sql.pg_text,
                )
                await conn.execute(text)
                arity = len(types)
        placeholders = ", ".join(f"${n}" for n in range(1, arity + 1))
        call = CALL.pg_text.format(function=name, placeholders=placeholders)
        self._calls[sql.name] = call
        return call


async def _type_names(conn: asyncpg.Connection, types: Sequence[Any]) -> list[str]:
    """The names of asyncpg's described types, as a function's definition spells them."""
    [found] = await conn.fetch(TYPE_NAMES.pg_text, [described.oid for described in types])
    names: list[str] = found["types"]
    return names


async def _columns(conn: asyncpg.Connection, sql: Sql, attributes: Sequence[Any]) -> str:
    """The statement's result columns as a function's RETURNS TABLE lists them."""
    names = [column.name for column in attributes]
    if len(set(names)) < len(names):
        raise ValueError(f"statement {sql.name!r} names a column twice: {names}")
    types = await _type_names(conn, [column.type for column in attributes])
    return ", ".join(f'"{n}" {t}' for n, t in zip(names, types, strict=True))
