"""A synthetic scans table written with SQL, for bench/reconcile.py ONLY.

This is not intake and measures nothing about it: the rows go in behind the server's back
(COPY on PostgreSQL, executemany on SQLite), without the live-key lookup, the events or the
transactions a submission runs. It exists so that reconcile.py can time the reconciliation
over a million rows without filling them through the API for hours. bench/bench.py fills
through the public API and must never import this module.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import Engine, create_engine, insert, select
from sqlalchemy.engine import make_url

from mainframe.store.engine.schema import endpoints, scans
from mainframe.store.engine.sqlalchemy_engine import sqlalchemy_url

# Rows per executemany (SQLite) or per COPY (PostgreSQL) transaction.
CHUNK_ROWS = 10_000
HOUR_US = 3_600_000_000
# A database name we are willing to CREATE and DROP: letters, digits and underscores.
_DATABASE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _row(endpoint_id: int, n: int, status: str, created: int) -> dict[str, Any]:
    name = f"synthetic-{status[0]}{n}"
    row: dict[str, Any] = {
        "endpoint_id": endpoint_id,
        "queue": "default",
        "name": name,
        "version": "1.0.0",
        "kind": "malware",
        "payload": '{"urls": ["https://files.example/' + name + '-1.0.0.tar.gz"]}',
        "status": status,
        "verified": True,
        "source": "synthetic",
        "created_at": created,
        "updated_at": created,
        "attempt_count": 0,
        "attempt_base": 0,
    }
    if status == "FINISHED":
        row.update(
            worker="synthetic-worker",
            leased_at=created + 1_000_000,
            finished_at=created + 3_000_000,
            updated_at=created + 3_000_000,
            result='{"verdict":"ok"}',
            attempt_count=1,
            assignment_id=f"{name}-a1",
        )
    if "available_at" in scans.c:  # due now (revision 0006 and later)
        row["available_at"] = created
    return row


def seed_scans(
    engine: Engine, *, endpoint_id: int, queued: int, finished: int, now_us: int
) -> None:
    """Insert `finished` FINISHED scans (lower ids) then `queued` QUEUED ones, created over
    the past hour, oldest first. No attempt history is written."""
    total = max(queued + finished, 1)
    done = 0
    for status, count in (("FINISHED", finished), ("QUEUED", queued)):
        for start in range(0, count, CHUNK_ROWS):
            rows = [
                _row(endpoint_id, n, status, now_us - HOUR_US + (done + i) * HOUR_US // total)
                for i, n in enumerate(range(start, min(count, start + CHUNK_ROWS)))
            ]
            _insert(engine, rows)
            done += len(rows)


def _insert(engine: Engine, rows: list[dict[str, Any]]) -> None:
    columns = list(rows[0])
    if engine.dialect.name != "postgresql":
        with engine.begin() as conn:
            conn.execute(insert(scans), rows)
        return
    with engine.begin() as conn:
        # COPY is several times faster than multi-row INSERT on PostgreSQL.
        driver = conn.connection.driver_connection
        assert driver is not None
        with (
            driver.cursor() as cursor,
            cursor.copy(f"COPY scans ({', '.join(columns)}) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row([row.get(c) for c in columns])


def analyze(engine: Engine) -> None:
    """Refresh the planner's statistics after the load."""
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE scans")
        return
    with engine.begin() as conn:
        conn.exec_driver_sql("ANALYZE")


def endpoint_id_of(engine: Engine, name: str) -> int:
    with engine.begin() as conn:
        found = conn.scalar(select(endpoints.c.id).where(endpoints.c.name == name))
    if found is None:
        raise LookupError(f"no endpoint named {name!r}")
    return int(found)


def create_database(admin_url: str, name: str) -> str:
    """CREATE DATABASE `name` next to `admin_url`'s database; return the new database's URL."""
    _run_autocommit(admin_url, f"CREATE DATABASE {_checked(name)}")
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def drop_database(admin_url: str, name: str) -> None:
    _run_autocommit(admin_url, f"DROP DATABASE IF EXISTS {_checked(name)} WITH (FORCE)")


def _checked(name: str) -> str:
    if not _DATABASE_NAME.match(name):
        raise ValueError(f"refusing database name {name!r}")
    return name


def _run_autocommit(admin_url: str, statement: str) -> None:
    engine = create_engine(sqlalchemy_url(admin_url), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql(statement)
    finally:
        engine.dispose()
