"""Bulk seeding and plan inspection for the benchmark (bench/bench.py): fast multi-row inserts
of QUEUED and FINISHED scans, a fresh PostgreSQL database per run, and EXPLAIN of the exact
job-poll statements. Kept in the store so that SQL stays in one package."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

from sqlalchemy import Connection, Engine, create_engine, func, insert, literal, select
from sqlalchemy.engine import make_url
from sqlalchemy.sql import ClauseElement

from mainframe.lifecycle.rules import AttemptOutcome, Status
from mainframe.store import leasing
from mainframe.store.engine import sqlalchemy_url
from mainframe.store.schema import attempts, endpoints, scans

Progress = Callable[[int, int], None]

# Rows per executemany (SQLite) or per COPY (PostgreSQL) transaction.
CHUNK_ROWS = 10_000
# The columns a seeded scan sets; `id` comes from the table's own sequence.
SEED_COLUMNS = (
    "endpoint_id",
    "queue",
    "name",
    "version",
    "kind",
    "payload",
    "status",
    "verified",
    "source",
    "worker",
    "leased_at",
    "created_at",
    "updated_at",
    "finished_at",
    "fail_reason",
    "result",
    "attempt_count",
    "assignment_id",
    "lease_expires_at",
    "wait_reason",
    "dead_lettered_at",
    "attempt_base",
)
SEED_WORKER = "seed-worker"
SEED_SOURCE = "seed-source"
# A database name we are willing to CREATE and DROP: letters, digits and underscores.
_DATABASE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def seed_scans(
    engine: Engine,
    *,
    endpoint_id: int,
    queued: int,
    finished: int,
    now_us: int,
    label: str = "seed",
    with_attempts: bool = True,
    progress: Progress | None = None,
) -> None:
    """Insert `finished` FINISHED scans (older, lower ids) then `queued` QUEUED scans.

    Names are `{label}-{n}`, so a later top-up with another label never collides with the
    live-key index. FINISHED scans get their closed first attempt in `attempts` too."""
    total = queued + finished
    done = 0
    for status, count in ((Status.FINISHED, finished), (Status.QUEUED, queued)):
        for start in range(0, count, CHUNK_ROWS):
            rows = [
                _scan_row(endpoint_id, f"{label}-{status.value[0]}{n}", status, now_us, total, n)
                for n in range(start, min(count, start + CHUNK_ROWS))
            ]
            with engine.begin() as conn:
                _insert_rows(conn, rows)
            done += len(rows)
            if progress is not None:
                progress(done, total)
    if with_attempts and finished:
        with engine.begin() as conn:
            _insert_finished_attempts(conn, endpoint_id=endpoint_id, label=label)


def _scan_row(
    endpoint_id: int, name: str, status: Status, now_us: int, total: int, n: int
) -> tuple[Any, ...]:
    # Spread created_at over the past hour, oldest first, like a real backlog.
    created = now_us - 3_600_000_000 + (n * 3_600_000_000) // max(total, 1)
    payload = '{"urls": ["https://files.example/' + name + '-1.0.0.tar.gz"]}'
    if status is Status.QUEUED:
        return (
            endpoint_id,
            "default",
            name,
            "1.0.0",
            "malware",
            payload,
            status.value,
            True,
            SEED_SOURCE,
            None,
            None,
            created,
            created,
            None,
            None,
            None,
            0,
            None,
            None,
            None,
            None,
            0,
        )
    leased = created + 1_000_000
    closed = leased + 2_000_000
    return (
        endpoint_id,
        "default",
        name,
        "1.0.0",
        "malware",
        payload,
        status.value,
        True,
        SEED_SOURCE,
        SEED_WORKER,
        leased,
        created,
        closed,
        closed,
        None,
        '{"verdict":"ok"}',
        1,
        f"{name}-a1",
        None,
        None,
        None,
        0,
    )


def _insert_rows(conn: Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    if conn.dialect.name == "postgresql":
        # COPY is several times faster than multi-row INSERT on PostgreSQL.
        driver = conn.connection.driver_connection
        assert driver is not None
        columns = ", ".join(SEED_COLUMNS)
        with driver.cursor() as cursor, cursor.copy(f"COPY scans ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        return
    statement = insert(scans).compile(dialect=conn.dialect, column_keys=list(SEED_COLUMNS))
    assert tuple(statement.positiontup or ()) == SEED_COLUMNS  # rows are in this order
    conn.exec_driver_sql(str(statement), list(rows))


def _insert_finished_attempts(conn: Connection, *, endpoint_id: int, label: str) -> None:
    seeded = select(
        scans.c.id,
        literal(1),
        literal(1),
        scans.c.assignment_id,
        scans.c.worker,
        scans.c.leased_at,
        scans.c.finished_at,
        literal(AttemptOutcome.FINISHED.value),
    ).where(
        scans.c.endpoint_id == endpoint_id,
        scans.c.status == Status.FINISHED.value,
        scans.c.worker == SEED_WORKER,
        scans.c.name.like(f"{label}-%"),
    )
    conn.execute(
        insert(attempts).from_select(
            [
                "scan_id",
                "seq",
                "attempt",
                "assignment_id",
                "worker",
                "leased_at",
                "closed_at",
                "outcome",
            ],
            seeded,
        )
    )


def analyze(engine: Engine) -> None:
    """Refresh the planner's statistics after a bulk load."""
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE scans")
            conn.exec_driver_sql("ANALYZE attempts")
        return
    with engine.begin() as conn:
        conn.exec_driver_sql("ANALYZE")


def endpoint_id_of(engine: Engine, name: str) -> int:
    with engine.begin() as conn:
        found = conn.scalar(select(endpoints.c.id).where(endpoints.c.name == name))
    if found is None:
        raise LookupError(f"no endpoint named {name!r}")
    return int(found)


def count_by_status(engine: Engine, *, endpoint_id: int) -> dict[str, int]:
    """Scans of the endpoint per status."""
    query = (
        select(scans.c.status, func.count())
        .where(scans.c.endpoint_id == endpoint_id)
        .group_by(scans.c.status)
    )
    with engine.begin() as conn:
        return {row[0]: int(row[1]) for row in conn.execute(query)}


# Fresh PostgreSQL databases -----------------------------------------------------------------


def _checked_name(name: str) -> str:
    if not _DATABASE_NAME.match(name):
        raise ValueError(f"refusing database name {name!r}")
    return name


def create_database(admin_url: str, name: str) -> str:
    """CREATE DATABASE `name` next to `admin_url`'s database; return the new database's URL."""
    _run_autocommit(admin_url, f"CREATE DATABASE {_checked_name(name)}")
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def drop_database(admin_url: str, name: str) -> None:
    _run_autocommit(admin_url, f"DROP DATABASE IF EXISTS {_checked_name(name)} WITH (FORCE)")


def _run_autocommit(admin_url: str, statement: str) -> None:
    engine = create_engine(sqlalchemy_url(admin_url), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql(statement)
    finally:
        engine.dispose()


# Plans of the job poll ----------------------------------------------------------------------


class _Capture:
    """Stands in for a Connection to catch the statement a leasing function would run."""

    def __init__(self) -> None:
        self.statements: list[tuple[ClauseElement, dict[str, Any]]] = []

    def execute(self, statement: ClauseElement, params: dict[str, Any] | None = None) -> _Capture:
        self.statements.append((statement, params or {}))
        return self

    def all(self) -> list[Any]:
        return []

    def __iter__(self) -> Iterator[Any]:
        return iter(())


def lease_statements(
    *, endpoint_id: int, batch: int, now_us: int
) -> dict[str, tuple[ClauseElement, dict[str, Any]]]:
    """The statements a job poll runs against the scans table, built by leasing.py itself,
    with the values it binds."""
    capture = _Capture()
    fake = cast(Connection, capture)
    leasing.lapsed_pending(
        fake,
        endpoint_id=endpoint_id,
        now=now_us,
        max_attempts=3,
        spent_limit=100,
        reclaim_limit=batch,
    )
    leasing.assign_queued(
        fake, endpoint_id=endpoint_id, limit=batch, worker="explain", now=now_us, expires=now_us + 1
    )
    lapsed, assign = capture.statements
    # The reference form of the lease's row choice, for comparison with what leasing.py builds.
    by_id = (
        select(scans.c.id)
        .where(scans.c.endpoint_id == endpoint_id, scans.c.status == Status.QUEUED.value)
        .order_by(scans.c.id)
        .limit(batch)
        .with_for_update(skip_locked=True)
    )
    return {"lapsed_pending": lapsed, "assign_queued": assign, "oldest_by_id": (by_id, {})}


def explain_lease(engine: Engine, *, endpoint_id: int, batch: int, now_us: int) -> dict[str, str]:
    """EXPLAIN (PostgreSQL: ANALYZE, BUFFERS, rolled back) or EXPLAIN QUERY PLAN (SQLite) of
    each job-poll statement, keyed by name; each value starts with the SQL it explains."""
    plans: dict[str, str] = {}
    postgres = engine.dialect.name == "postgresql"
    prefix = "EXPLAIN (ANALYZE, BUFFERS) " if postgres else "EXPLAIN QUERY PLAN "
    for name, (statement, values) in lease_statements(
        endpoint_id=endpoint_id, batch=batch, now_us=now_us
    ).items():
        compiled: Any = statement.compile(dialect=engine.dialect)
        bound: dict[str, Any] = dict(compiled.construct_params(values) or {})
        order = compiled.positiontup or ()
        args: Any = bound if postgres else tuple(bound[k] for k in order)
        sql = str(compiled)
        with engine.connect() as conn:
            trans = conn.begin()
            try:
                rows = conn.exec_driver_sql(prefix + sql, args).all()
            finally:
                trans.rollback()  # EXPLAIN ANALYZE of the UPDATE really leases: undo it
        lines = [row[0] if postgres else _sqlite_plan_line(row) for row in rows]
        plans[name] = f"{sql}\n  -- with {bound}\n" + "\n".join(lines)
    return plans


def _sqlite_plan_line(row: Any) -> str:
    # EXPLAIN QUERY PLAN rows are (id, parent, notused, detail).
    return f"{row[0]:>3} {row[1]:>3}  {row[3]}"
