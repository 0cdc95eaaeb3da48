"""The server's PostgreSQL connections as operators run them (docs/scale-out.md): a statement
that runs past MAINFRAME_STATEMENT_TIMEOUT_SECONDS is cancelled and answered 503, leaving the
connection usable; the settings the store relies on are reported when they are not in force
and are in force once `mainframe db upgrade` made them the role's defaults; the connection
gauges count in-use, idle and waiting connections on both databases."""

from __future__ import annotations

import asyncio
import time
from decimal import Decimal
from typing import Any

import asyncpg
import pytest
from anyio.from_thread import BlockingPortal
from sqlalchemy import create_engine, text

from mainframe.clock import FakeClock
from mainframe.store import Budget, Store, Unavailable, open_database
from mainframe.store.accounts.owners import OPERATOR
from mainframe.store.engine.database import REGISTRY, Sql
from mainframe.store.engine.migrate import set_role_defaults
from mainframe.store.engine.pg_functions import Functions
from mainframe.store.engine.pg_settings import SessionPolicy
from mainframe.store.engine.sqlalchemy_engine import create_store_engine
from tests.blocking import Blocking
from tests.conftest import PG_ADMIN_URL
from tests.integration.conftest import Api
from tests.integration.test_plans import _registered
from tests.pgbouncer import PgBouncer
from tests.polling import wait_for


def store_on(url: str, loop: BlockingPortal, policy: SessionPolicy) -> Blocking:
    db = open_database(url, policy=policy)
    return Blocking(Store.build(db, Budget.of(job_timeout=30, max_attempts=3)), loop)


def test_a_statement_past_its_time_limit_is_503_and_the_connection_lives_on(
    pg_url: str, loop: BlockingPortal
) -> None:
    store = store_on(pg_url, loop, SessionPolicy("none", statement_timeout_ms=200))
    store.owners.create_owner("alice")
    store.owners.create_endpoint(
        store.owners.owner_id("alice"), "npm", open_intake=False, origin="cli"
    )
    holder = create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://"))
    with holder.connect() as conn:
        # Another session holds the endpoint's row: a new credential waits for it.
        conn.execute(text("SELECT id FROM endpoints WHERE name = 'npm' FOR UPDATE"))
        with pytest.raises(Unavailable) as stuck:
            store.owners.create_token(OPERATOR, "npm", role="worker", principal="w1", origin="cli")[
                1
            ]
        assert stuck.value.code == "database_busy"
        conn.rollback()
    holder.dispose()
    assert store.owners.create_token(OPERATOR, "npm", role="worker", principal="w1", origin="cli")[
        1
    ]
    store.close()


def test_a_call_past_the_database_deadline_is_503_and_the_next_one_is_served(
    pg_url: str, loop: BlockingPortal
) -> None:
    policy = SessionPolicy("none", statement_timeout_ms=30_000, deadline_s=0.5)
    store = store_on(pg_url, loop, policy)
    store.owners.create_owner("alice")
    store.owners.create_endpoint(
        store.owners.owner_id("alice"), "npm", open_intake=False, origin="cli"
    )
    holder = create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://"))
    with holder.connect() as conn:
        # The database never answers while another session holds the row: the deadline,
        # not the statement timeout, ends the call, and its connection is dropped.
        conn.execute(text("SELECT id FROM endpoints WHERE name = 'npm' FOR UPDATE"))
        started = time.monotonic()
        with pytest.raises(Unavailable) as stuck:
            store.owners.create_token(OPERATOR, "npm", role="worker", principal="w1", origin="cli")
        waited = time.monotonic() - started
        conn.rollback()
    holder.dispose()
    assert stuck.value.code == "database_unavailable" and "within 0.5 s" in str(stuck.value)
    assert waited < 2.0
    assert store.owners.create_token(OPERATOR, "npm", role="worker", principal="w1", origin="cli")[
        1
    ]
    store.close()


def test_a_call_waiting_for_a_connection_stops_waiting_at_the_deadline(
    pg_url: str, loop: BlockingPortal
) -> None:
    db = open_database(pg_url, pool_size=1, policy=SessionPolicy("none", deadline_s=0.5))

    async def scenario() -> tuple[Unavailable | None, float]:
        held, release = asyncio.Event(), asyncio.Event()

        async def hold() -> None:
            # The pool's one connection, held by a lasting call (the statement bound on top).
            async with db.write(lasting=True):
                held.set()
                await release.wait()

        holding = asyncio.create_task(hold())
        await held.wait()
        found: Unavailable | None = None
        started = time.monotonic()
        try:
            await asyncio.wait_for(db.ping(), 5)  # the test's own bound, should the deadline fail
        except Unavailable as exc:
            found = exc
        except TimeoutError:
            pass
        waited = time.monotonic() - started
        release.set()
        await holding
        await db.ping()  # the connection came back and serves the next call
        return found, waited

    refused, waited = loop.call(scenario)
    assert refused is not None and refused.code == "database_unavailable", refused
    assert 0.4 <= waited < 2.0
    assert db.pool_counts() == (0, 1, 0), "no connection or waiter left behind"
    loop.call(db.close)


def test_settings_not_in_force_are_reported_until_the_role_has_them(
    pg_url: str, loop: BlockingPortal
) -> None:
    policy = SessionPolicy("transaction", statement_timeout_ms=12_000)
    store = store_on(pg_url, loop, policy)
    report = store.host_report()
    assert report.writable
    assert report.not_in_force == {
        "jit": "on",
        "plan_cache_mode": "auto",
        "idle_in_transaction_session_timeout": "0",
        "statement_timeout": "0",
    }, "a session that could not be given them is told what is missing"
    store.close()
    engine = create_store_engine(pg_url)
    assert len(set_role_defaults(engine, policy)) == len(policy.role_defaults())
    engine.dispose()
    store = store_on(pg_url, loop, policy)
    assert store.host_report().not_in_force == {}, "new sessions have the role's defaults"
    store.close()


def test_directly_every_setting_is_in_force_without_an_upgrade(
    pg_url: str, loop: BlockingPortal
) -> None:
    store = store_on(pg_url, loop, SessionPolicy("none"))
    assert store.host_report().not_in_force == {}
    store.close()


def test_the_connection_gauges_are_scraped(api: Api) -> None:
    api.submit()
    page = api.client.get("/metrics").text
    gauges = {
        line.split("{")[1].split("}")[0]: float(line.rsplit(" ", 1)[1])
        for line in page.splitlines()
        if line.startswith("mainframe_db_connections{")
    }
    assert set(gauges) == {'state="in_use"', 'state="idle"', 'state="waiting"'}
    # Background work (the reconciliation) may hold the connection while the page is made.
    assert gauges['state="idle"'] + gauges['state="in_use"'] >= 1, gauges
    assert gauges['state="waiting"'] == 0, gauges


def test_a_fake_clock_still_pins_the_database_clock(pg_url: str, loop: BlockingPortal) -> None:
    clock = FakeClock()
    db = open_database(pg_url, clock=clock, policy=SessionPolicy("none"))
    store = Blocking(Store.build(db, Budget.of(job_timeout=30, max_attempts=3), clock=clock), loop)
    store.owners.create_owner("alice")
    assert store.host_report().writable
    store.close()


def test_the_watcher_reads_a_multi_host_url(pg_url: str) -> None:
    from mainframe.watch.command import open_watch_store
    from tests.serverproc import free_port

    host, database = pg_url.rsplit("@", 1)[1].split("/")
    down = f"127.0.0.1:{free_port()}"  # the first host named is not there at all
    url = f"postgresql://postgres@{down},{host}/{database}?target_session_attrs=read-write"
    store = open_watch_store(url)
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT inet_server_port()")).scalar() == 5432
    store.engine.dispose()


def test_through_transaction_pooling_each_statement_is_described_once_and_sent_whole(
    pg_url: str,
) -> None:
    """Two servers' connections take turns on PgBouncer's one server connection, where each
    overwrites the other's unnamed statement: every call still answers its own statement, as
    one round trip that carries its text (store/engine/pg_functions.py::OneTrip), and each
    connection asks for a statement's description once."""
    database = pg_url.rsplit("/", 1)[1]

    async def take_turns(url: str) -> tuple[list[tuple[str, str]], int]:
        functions = Functions()
        first, second = [await asyncpg.connect(url, statement_cache_size=0) for _ in range(2)]
        described = 0
        prepare = asyncpg.Connection.prepare

        async def counted(self: asyncpg.Connection, *args: Any, **kwargs: Any) -> Any:
            nonlocal described
            described += 1
            return await prepare(self, *args, **kwargs)

        try:
            asyncpg.Connection.prepare = counted  # type: ignore[method-assign]
            answers = []
            for n in range(1, 6):
                status = await functions.run(first, "SELECT generate_series(1, $1::int)", [n])
                kept = await functions.trips.statement(second, "SELECT $1::text || 'x' AS v")
                [row] = await kept.fetch(str(n))
                answers.append((status, row["v"]))
            return answers, described
        finally:
            asyncpg.Connection.prepare = prepare  # type: ignore[method-assign]
            for conn in (first, second):
                await conn.close()

    with PgBouncer("transaction", pool_size=1) as pooler:
        answers, described = asyncio.run(take_turns(pooler.url(database)))
    expected = [(f"SELECT {n}", f"{n}x") for n in range(1, 6)]
    assert answers == expected, "each call ran its own statement with its own values"
    assert described == 2, "one description per statement and connection"


# Columns of the types the store's statements return, one named as a column the statement
# reads (a function's result column is a PL/pgSQL variable too; the statement's column wins).
TYPED = """
SELECT t.id, t.id > 0 AS positive, CAST('x' AS varchar(10)) AS name, CAST(NULL AS text) AS gone,
       ARRAY['a', 'b'] AS tags, CAST('{"a": 1}' AS jsonb) AS doc, 1.5 AS ratio
FROM (SELECT CAST(:n AS bigint) AS id UNION ALL SELECT CAST(:n AS bigint) + 1) AS t
WHERE t.id >= :n
ORDER BY t.id"""


def test_through_transaction_pooling_a_function_returns_the_rows_the_statement_does(
    pg_url: str,
) -> None:
    """A statement sent as its function's call answers the rows it answers when sent itself,
    column for column and type for type, from the server that made the function and from
    another that finds it made."""
    database = pg_url.rsplit("/", 1)[1]
    sql = Sql("test_typed_rows", TYPED)
    del REGISTRY[sql.name]  # the test's own: no plan case for the registry's checks

    async def both(url: str) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]]]:
        conn = await asyncpg.connect(pg_url)
        try:
            direct = [dict(row) for row in await conn.fetch(sql.pg_text, *sql.pg_args({"n": 7}))]
        finally:
            await conn.close()
        answers = []
        for functions in (Functions(), Functions()):  # the second finds the function made
            conn = await asyncpg.connect(url, statement_cache_size=0)
            try:
                for _ in range(2):  # made (or found) at the first call, called at both
                    found = await functions.rows(conn, sql, sql.pg_args({"n": 7}))
                    answers.append([dict(row) for row in found])
            finally:
                await conn.close()
        return direct, answers

    with PgBouncer("transaction", pool_size=2) as pooler:
        direct, answers = asyncio.run(both(pooler.url(database)))
    assert direct[0] == {
        "id": 7,
        "positive": True,
        "name": "x",
        "gone": None,
        "tags": ["a", "b"],
        "doc": '{"a": 1}',
        "ratio": Decimal("1.5"),
    }
    assert len(direct) == 2
    for answer in answers:
        assert answer == direct
        assert [type(v) for v in answer[0].values()] == [type(v) for v in direct[0].values()]


def test_every_statement_names_each_column_of_its_rows_once(pg_url: str) -> None:
    """A statement's function returns its columns by name (store/engine/pg_functions.py), so
    no statement of the store may name a result column twice."""

    async def described() -> dict[str, list[str]]:
        conn = await asyncpg.connect(pg_url)
        found = {}
        try:
            for name in sorted(_registered()):
                text_ = REGISTRY[name].pg_text
                if "{" in text_ and name.startswith("function_"):
                    continue  # a template, not a statement
                try:
                    kept = await conn.prepare(text_)
                except asyncpg.PostgresError:  # SQLite's own text, a comment for PostgreSQL
                    continue
                found[name] = [column.name for column in kept.get_attributes()]
        finally:
            await conn.close()
        return found

    columns = asyncio.run(described())
    assert {"complete", "lease", "authenticate"} <= columns.keys()
    assert {name: named for name, named in columns.items() if len(set(named)) < len(named)} == {}


def _transactions(admin: Any, database: str) -> int:
    """The transactions the database has committed, once none of its sessions is left (a
    session reports its counts when it ends)."""

    def ended() -> bool:
        found = admin.execute(
            text("SELECT count(*) FROM pg_stat_activity WHERE datname = :db"), {"db": database}
        )
        return found.scalar() == 0

    wait_for(ended, timeout=10, what="the pooler's server connections closed")
    found = admin.execute(
        text("SELECT xact_commit FROM pg_stat_database WHERE datname = :db"), {"db": database}
    )
    return int(found.scalar_one())


def test_through_transaction_pooling_two_servers_taking_turns_cost_no_set_between(
    pg_url: str,
) -> None:
    """The servers' connections name the encoding as PostgreSQL reports it, so PgBouncer, which
    compares a client's startup parameters with its server connection's, sends no SET before
    each transaction when two clients take turns on one server connection; asyncpg's own
    spelling (`'utf-8'`) doubles the transactions, the control."""
    database = pg_url.rsplit("/", 1)[1]
    calls = 20

    async def take_turns(url: str, settings: dict[str, str]) -> None:
        connections = [
            await asyncpg.connect(url, statement_cache_size=0, server_settings=settings)
            for _ in range(2)
        ]
        for _ in range(calls):
            for conn in connections:
                assert await conn.fetchval("SELECT current_setting('client_encoding')") == "UTF8"
        for conn in connections:
            await conn.close()

    policy = SessionPolicy("transaction").startup()
    asyncpg_spelling = {k: v for k, v in policy.items() if k != "client_encoding"}
    engine = create_engine(
        PG_ADMIN_URL.replace("postgresql://", "postgresql+psycopg://", 1),
        isolation_level="AUTOCOMMIT",
    )
    committed = {}
    with engine.connect() as admin:
        for label, settings in (("server", policy), ("asyncpg", asyncpg_spelling)):
            before = _transactions(admin, database)
            with PgBouncer("transaction", pool_size=1) as pooler:
                asyncio.run(take_turns(pooler.url(database), settings))
            committed[label] = _transactions(admin, database) - before
    engine.dispose()
    assert committed["server"] <= 2 * calls + 2, committed  # the calls, and a check or two
    assert committed["asyncpg"] >= 3 * calls, committed  # a SET before most of them
