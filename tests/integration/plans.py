"""Planning the store's statements as the server runs them, for the plan tests.

SQLite: the statement's text with the server's values bound, under EXPLAIN QUERY PLAN, on a
connection where `mf_now()` is registered (answering the fill's NOW) as the store registers
it. PostgreSQL: the numbered text PREPAREd without parameter types, as asyncpg prepares it
(the server infers them), then EXPLAIN EXECUTE with the server's values under the generic
plan PostgreSQL may keep after five runs (or a custom plan, where the server asks for one),
with `mainframe.clock_us` pinned to NOW. A Case names the step its plan must take on each
database; `assert_plan` also rejects any read of all of `scans`, and any sort the case does
not declare."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from psycopg import sql as pgsql
from sqlalchemy import Connection, Engine, text

from mainframe.store.engine import schema
from mainframe.store.engine.database import Sql, numbered
from mainframe.store.engine.migrate import upgrade
from mainframe.store.engine.sqlalchemy_engine import create_store_engine
from tests import conftest
from tests.conftest import PG_ADMIN_URL, drop_pg_database, fresh_pg_database

NOW = 1_750_000_000_000_000  # every fill's "now", in microseconds

# The databases a plan is checked on. The server never analyses its SQLite file, so SQLite
# plans without statistics; an operator may run ANALYZE, so the plans must hold with them
# too. PostgreSQL is analysed, as autovacuum leaves a live database.
DATABASES = tuple(
    kind
    for kind in ("sqlite", "sqlite-analysed", "postgresql")
    if kind.split("-")[0] in conftest.DATABASES
)

# The partial indexes of scans: each holds a slice (live scans of a status, dead letters),
# so a SQLite SCAN through one reads that slice, never the finished history.
PARTIAL = frozenset(
    str(index.name)
    for index in schema.scans.indexes
    if index.dialect_options["sqlite"].get("where") is not None
)

# Where a case's plan sorts (a small result: a few hooks, one endpoint's live scans).
SORTS = frozenset({"sqlite", "postgresql"})
SORTS_ON_SQLITE = frozenset({"sqlite"})
SORTS_ON_PG = frozenset({"postgresql"})


# The steps a plan must hold: one regex, or several (each somewhere in the plan).
Steps = str | tuple[str, ...]


@dataclass(frozen=True)
class Variant:
    """A statement rewritten for a negative control, kept out of the registry (where a name
    without a case would fail the coverage test)."""

    sqlite: str
    postgresql: str

    @property
    def pg_text(self) -> str:
        return numbered(self.postgresql)[0]

    def pg_args(self, params: Mapping[str, Any]) -> list[Any]:
        return [params[name] for name in numbered(self.postgresql)[1]]


@dataclass(frozen=True)
class Case:
    """One statement with the server's values, and the step its plan must take on each
    database (a regex over the plan)."""

    sql: Sql | Variant
    params: dict[str, Any]
    sqlite: Steps | None  # None: PostgreSQL only (its SQLite text is a comment)
    postgresql: Steps | None  # None: SQLite only (its PostgreSQL text is a comment)
    sorts: frozenset[str] = frozenset()  # the dialects whose plan may sort
    custom_plan: bool = False  # the server plans it with its values on PostgreSQL


def filled(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    fill: Callable[[Connection], None],
) -> Iterator[Engine]:
    """A database of the kind `request.param` names (one of DATABASES), at head and filled,
    for a module's plans (they only read); dropped afterwards."""
    name = None
    if request.param.startswith("sqlite"):
        url = f"sqlite:///{tmp_path_factory.mktemp('plans') / 'plans.db'}"
    else:
        name = fresh_pg_database(request.getfixturevalue("pg_template"))
        url = f"{PG_ADMIN_URL.rpartition('/')[0]}/{name}"
    engine = create_store_engine(url)
    if name is None:
        upgrade(engine)
    with engine.begin() as conn:
        fill(conn)
    # On PostgreSQL VACUUM also merges the trigram index's pending list, as autovacuum would
    # (a long pending list makes every GIN search look expensive).
    analyse = {"sqlite-analysed": "ANALYZE", "postgresql": "VACUUM ANALYZE"}.get(request.param)
    if analyse is not None:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text(analyse))
    yield engine
    engine.dispose()
    if name is not None:
        drop_pg_database(name)


def sqlite_plan(path: str, statement: str, params: Mapping[str, Any]) -> str:
    """EXPLAIN QUERY PLAN of a SQLite text with the server's values bound, one step a line."""
    conn = sqlite3.connect(path)
    try:
        conn.create_function("mf_now", 0, lambda: NOW, deterministic=True)
        found = conn.execute("EXPLAIN QUERY PLAN " + statement, dict(params)).fetchall()
    finally:
        conn.close()
    return "\n".join(str(row[3]) for row in found)


def pg_plan(
    engine: Engine,
    sql: Sql | Variant,
    params: Mapping[str, Any],
    *,
    mode: str = "force_generic_plan",
) -> str:
    """EXPLAIN EXECUTE of the PostgreSQL text prepared as asyncpg prepares it (the server
    infers every parameter's type), under plan_cache_mode `mode`, the clock at NOW."""
    values = sql.pg_args(params)
    with engine.connect() as conn, conn.begin() as tx:
        driver: Any = conn.connection.driver_connection
        driver.execute(f"SET LOCAL plan_cache_mode = {mode}")
        driver.execute("SELECT set_config('mainframe.clock_us', %s, true)", (str(NOW),))
        driver.execute("PREPARE plan_under_test AS " + sql.pg_text)
        try:  # a prepared statement outlives its transaction
            arguments = pgsql.SQL(", ").join(pgsql.Literal(v) for v in values)
            explain = pgsql.SQL("EXPLAIN EXECUTE plan_under_test ({})").format(arguments)
            found = driver.execute(explain if values else "EXPLAIN EXECUTE plan_under_test")
            lines = [row[0] for row in found.fetchall()]
        finally:
            driver.execute("DEALLOCATE plan_under_test")
            tx.rollback()
    return "\n".join(lines)


def plan_of(engine: Engine, case: Case) -> str:
    """The case's plan on the engine's database, as the server would get it."""
    if engine.dialect.name == "sqlite":
        assert engine.url.database is not None
        return sqlite_plan(engine.url.database, case.sql.sqlite, case.params)
    mode = "force_custom_plan" if case.custom_plan else "force_generic_plan"
    return pg_plan(engine, case.sql, case.params, mode=mode)


def sqlite_full_reads(plan: str, statement: str) -> list[str]:
    """The plan's steps that read all of scans: a SCAN of it (or of an alias the statement
    gives it) other than through a partial index."""
    names = {"scans", *re.findall(r"\bscans\s+AS\s+(\w+)", statement, re.I)}
    found = []
    for line in plan.splitlines():
        step = re.match(r"SCAN (\w+)(?: USING (?:COVERING )?INDEX (\w+))?", line)
        if step and step[1] in names and step[2] not in PARTIAL:
            found.append(line)
    return found


def assert_plan(engine: Engine, case: Case, plan: str) -> None:
    """The plan takes the expected step, never reads all of `scans`, and sorts only where
    the case declares it."""
    dialect = engine.dialect.name
    if dialect == "sqlite":
        assert case.sqlite is not None
        expected, sort = case.sqlite, r"USE TEMP B-TREE"
        full = sqlite_full_reads(plan, case.sql.sqlite)
    else:
        assert case.postgresql is not None
        expected, sort = case.postgresql, r"\bSort\b"
        full = re.findall(r"^.*Seq Scan on scans\b.*$", plan, re.M)
    for step in (expected,) if isinstance(expected, str) else expected:
        assert re.search(step, plan, re.M), f"expected {step!r} in:\n{plan}"
    assert not full, f"reads all of scans ({full}):\n{plan}"
    if dialect not in case.sorts:
        assert not re.search(sort, plan), f"sorts instead of walking an index:\n{plan}"


def sqlite_index(name: str, table: str = "scans") -> str:
    """A SQLite step that seeks `table` through index `name`."""
    return rf"^SEARCH {table} USING (COVERING )?INDEX {name} \("


def sqlite_pk(table: str = "scans") -> str:
    """A SQLite step that seeks `table` by its rowid primary key."""
    return rf"^SEARCH {table} USING INTEGER PRIMARY KEY \(rowid=\?\)"


def pg_index(name: str, table: str = "scans") -> str:
    """A PostgreSQL step that reads `table` through index `name`."""
    return (
        rf"(Index Scan|Index Scan Backward|Index Only Scan) using {name} on {table}\b"
        rf"|Bitmap Index Scan on {name}\b"
    )


def pg_within(cte: str, step: str) -> str:
    """`step` inside the plan of the CTE `cte` (its lines sit deeper than its heading)."""
    return rf"^  CTE {cte}\n(?:    .*\n)*?    .*(?:{step})"
