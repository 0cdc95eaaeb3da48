"""In transaction pooling a server asks the pooler at start-up whether it keeps prepared
statements (store/engine/postgres.py, PostgresDatabase.host_report) and follows the answer,
whatever `MAINFRAME_DATABASE_POOLER_PREPARES` assumed: through Debian's PgBouncer 1.18,
which passes a statement's name through to whichever server connection it lands on, rows
come from functions; through PgBouncer 1.24 with `max_prepared_statements`, the connections
keep their prepared statements as directly. Both poolers hold fewer server connections than
the server has clients, so the clients take turns on them."""

from __future__ import annotations

import asyncio

import pytest

from mainframe.store import open_database
from mainframe.store.engine.database import Database
from mainframe.store.engine.pg_settings import SessionPolicy
from mainframe.store.engine.statements import statement
from tests.pgbouncer import PgBouncer, functions_made

CLIENTS = 6  # the server's connections
SERVER_CONNECTIONS = 2  # the pooler's, which the clients take turns on
CALLS = 60
READ = statement("settings_in_force")  # a statement that returns rows: a function's, pooled
NAMES = '{"jit": "off"}'


async def _calls(db: Database) -> list[str]:
    """CALLS reads from CLIENTS connections at once, each the setting's value it read."""

    async def one() -> str:
        async with db.single() as tx:
            [row] = await tx.rows(READ, {"names": NAMES})
            return str(row["name"])

    return await asyncio.gather(*(one() for _ in range(CALLS)))


@pytest.mark.parametrize(
    ("keeps", "assumed"),
    [(False, True), (True, False), (False, False), (True, True)],
    ids=["1.18-assumed-keeping", "1.24-assumed-dropping", "1.18", "1.24"],
)
def test_the_server_follows_what_the_pooler_does_with_prepared_statements(
    pg_url: str, keeps: bool, assumed: bool
) -> None:
    database = pg_url.rsplit("/", 1)[1]
    with PgBouncer("transaction", pool_size=SERVER_CONNECTIONS, keeps_prepared=keeps) as pooler:

        async def run() -> tuple[bool | None, list[str]]:
            policy = SessionPolicy("transaction", pooler_prepares=assumed)
            db = open_database(pooler.url(database), pool_size=CLIENTS, policy=policy)
            try:
                report = await db.host_report()
                return report.pooler_keeps_prepared, await _calls(db)
            finally:
                await db.close()

        found, answers = asyncio.run(run())
        assert "ERROR" not in pooler.log(), pooler.log()
    assert found is keeps, "the server read what the pooler does"
    assert answers == ["jit"] * CALLS, "every call answered, on whichever server connection"
    made = sum(functions_made(pg_url).values())
    assert (made > 0) is not keeps, "functions only where the pooler drops prepared statements"
