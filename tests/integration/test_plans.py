"""Every hot statement's plan, pinned on both databases at a realistic table size.

A status bound as a parameter, or PostgreSQL's generic plan for a prepared statement (what
psycopg's statements get after five runs), can silently stop a statement using its partial
index; the plan then walks the finished history. Each case binds what the server binds and
fails when a step reads scans it should not (issue 7, item 1)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from psycopg import sql as pgsql
from psycopg.adapt import PyFormat, Transformer
from sqlalchemy import Connection, Engine, insert, text

from mainframe.lifecycle.rules import LIVE
from mainframe.store import totals
from mainframe.store.accounts import ENDPOINT_BY_ID
from mainframe.store.closing import (
    CLOSE_BATCH,
    DIAGNOSE,
    FAIL_UNLEASED,
    INSERT_HISTORY,
    close_sql,
    touch_sql,
)
from mainframe.store.engine import create_store_engine
from mainframe.store.intake import INSERT_SCAN, LIVE_PREDICATE, LIVE_SCAN, PROMOTE
from mainframe.store.leasing import (
    CLOSE_LAPSED,
    DEAD_LETTER_LAPSED,
    ENDPOINT_NAMES,
    LAPSED_ANYWHERE,
    LAPSED_OF_ENDPOINT,
    LEASE_DUE,
    REQUEUE_LAPSED,
)
from mainframe.store.migrate import upgrade
from mainframe.store.schema import endpoints, owners
from mainframe.store.sql import Sql
from mainframe.store.totals import BUMP
from tests.conftest import PG_ADMIN_URL, drop_pg_database, fresh_pg_database

NOW = 1_750_000_000_000_000  # the fill's "now", in microseconds
# Each scan column as an expression of `i`, the row's number in its segment (from 1); `t` is
# its creation time. Segment k takes ids k * 100,000 + i, alternating over endpoints 1 and 2.
# fmt: off
_BASE = {"id": ":first + i", "endpoint_id": "1 + i % 2", "queue": "'default'",
         "name": ":status || CAST(i AS TEXT)", "version": "'1.0'", "kind": "'scan'",
         "status": ":status", "verified": "TRUE", "source": "'feed'", "worker": "'w1'",
         "leased_at": "t + 1", "created_at": "t", "updated_at": "t + 3", "finished_at": "NULL",
         "fail_reason": "NULL", "result": "NULL", "attempt_count": "1",
         "assignment_id": "'a-' || CAST(i AS TEXT)", "lease_expires_at": "NULL",
         "dead_lettered_at": "NULL", "attempt_base": "0", "available_at": "NULL"}
_SEGMENTS = (
    ("FINISHED", 50_000, {"finished_at": "t + 3", "result": "'{}'"}),
    ("FAILED", 1_000, {"finished_at": "t + 3", "dead_lettered_at": "t + 3", "attempt_count": "3",
                       "fail_reason": "'lease_expired'"}),
    # One in ten waits out a retry backoff; the rest are due, oldest first.
    ("QUEUED", 5_000, {"worker": "NULL", "attempt_count": "CASE WHEN i % 10 = 0 THEN 1 ELSE 0 END",
                       "available_at": "CASE WHEN i % 10 = 0 THEN :now + 60000000 "
                                       "ELSE :now - (5001 - i) * 1000 END"}),
    # One in ten has lapsed.
    ("PENDING", 500, {"attempt_count": "1 + i % 3",
                      "lease_expires_at": "CASE WHEN i % 10 = 0 THEN :now - (501 - i) * 1000 "
                                          "ELSE :now + 30000000 - (501 - i) END"}),
    ("QUARANTINED", 200, {"verified": "FALSE", "source": "NULL", "worker": "NULL"}),
)
# fmt: on
PENDING_ID = 300_010  # the tenth PENDING row: endpoint 1, attempt 2, assignment a-10, lapsed
QUARANTINED_ID = 400_001


def _fill(conn: Connection) -> None:
    """Owners, endpoints and scans written directly: this measures plans, not intake."""
    conn.execute(insert(owners).values(id=1, name="alice", created_at=NOW))
    for endpoint_id, name in ((1, "pypi"), (2, "npm")):
        values = {"id": endpoint_id, "name": name, "owner_id": 1, "open_intake": True}
        conn.execute(insert(endpoints).values(**values, created_at=NOW))
        totals.create_rows(conn, endpoint_id)
    for k, (status, rows, overrides) in enumerate(_SEGMENTS):
        columns = _BASE | overrides
        exprs = re.sub(r"\bt\b", "(:now - 86400000000 + i * 1000)", ", ".join(columns.values()))
        conn.execute(
            text(
                f"INSERT INTO scans ({', '.join(columns)}) WITH RECURSIVE n(i) AS (SELECT 1 "
                f"UNION ALL SELECT i + 1 FROM n WHERE i < :rows) SELECT {exprs} FROM n"
            ),
            {"first": k * 100_000, "rows": rows, "status": status, "now": NOW},
        )
    conn.execute(text("ANALYZE"))


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def planned(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    """One filled, analysed database of each kind, shared by the module (plans only read)."""
    name = None
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('plans') / 'plans.db'}"
    else:
        name = fresh_pg_database(request.getfixturevalue("pg_template"))
        url = f"{PG_ADMIN_URL.rpartition('/')[0]}/{name}"
    engine = create_store_engine(url)
    if name is None:
        upgrade(engine)
    with engine.begin() as conn:
        _fill(conn)
    yield engine
    engine.dispose()
    if name is not None:
        drop_pg_database(name)


def sqlite_plan(engine: Engine, sql: Sql, params: Mapping[str, Any]) -> str:
    """EXPLAIN QUERY PLAN of the SQLite text with the server's values bound, one step a line."""
    raw = engine.raw_connection()
    try:
        found = raw.driver_connection.execute(  # type: ignore[union-attr]
            "EXPLAIN QUERY PLAN " + sql.text("sqlite"), dict(params)
        ).fetchall()
    finally:
        raw.close()
    return "\n".join(str(row[3]) for row in found)


def positional(pg_text: str) -> tuple[str, list[str]]:
    """psycopg's `%(name)s` as PREPARE's `$1..$n`, and the names in the order of their numbers."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match[1] not in names:
            names.append(match[1])
        return f"${names.index(match[1]) + 1}"

    return re.sub(r"%\((\w+)\)s", number, pg_text).replace("%%", "%"), names


def pg_plan(engine: Engine, sql: Sql, params: Mapping[str, Any]) -> str:
    """EXPLAIN EXECUTE of the statement's generic plan, each parameter declared with the type
    psycopg sends for the server's value (int2/int4/int8 by size; str and None unknown)."""
    statement, names = positional(sql.text("postgresql"))
    values = [params[name] for name in names]
    with engine.connect() as conn, conn.begin() as tx:
        driver: Any = conn.connection.driver_connection
        adapted = Transformer(driver)
        adapted.dump_sequence(values, [PyFormat.AUTO] * len(values))
        declared = ", ".join(_type_name(driver, oid) for oid in adapted.types)
        arguments = pgsql.SQL(", ").join(pgsql.Literal(value) for value in values)
        driver.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        driver.execute(f"PREPARE plan_under_test ({declared}) AS {statement}".replace(" ()", ""))
        try:  # a prepared statement outlives its transaction
            explain = pgsql.SQL("EXPLAIN EXECUTE plan_under_test ({})").format(arguments)
            found = driver.execute(explain if values else "EXPLAIN EXECUTE plan_under_test")
            lines = [row[0] for row in found.fetchall()]
        finally:
            driver.execute("DEALLOCATE plan_under_test")
            tx.rollback()
    return "\n".join(lines)


def _type_name(driver: Any, oid: int) -> str:
    info = driver.adapters.types.get(oid)
    if info is None:
        return "unknown"
    return f"{info.name}[]" if oid == info.array_oid else str(info.name)


def assert_sqlite_plan(plan: str, expected: str) -> None:
    """The plan takes the expected step, never scans all of `scans`, never sorts."""
    assert re.search(expected, plan, re.M), f"expected {expected!r} in:\n{plan}"
    assert not re.search(r"^SCAN scans\b", plan, re.M), f"full scan of scans:\n{plan}"
    assert "USE TEMP B-TREE" not in plan, f"sorts instead of walking an index:\n{plan}"


def assert_pg_plan(plan: str, expected: str) -> None:
    """The plan takes the expected step and never reads `scans` sequentially."""
    assert re.search(expected, plan, re.M), f"expected {expected!r} in:\n{plan}"
    assert not re.search(r"Seq Scan on scans\b", plan), f"sequential scan of scans:\n{plan}"


def sqlite_index(name: str) -> str:
    return rf"^SEARCH scans USING (COVERING )?INDEX {name} \("


def pg_index(name: str) -> str:
    return rf"(Index Scan|Index Only Scan) using {name} on scans\b|Bitmap Index Scan on {name}\b"


SQLITE_PK = r"^SEARCH scans USING INTEGER PRIMARY KEY \(rowid=\?\)"
PG_PK = pg_index("scans_pkey")
NO_SCAN = r"\A(?![\s\S]*\bSCAN )"  # an INSERT ... VALUES reads no table
INSERT_ATTEMPT = r"^Insert on attempts\s"
# endpoints and scan_totals hold a few rows each, one page: read whole or by key.
PG_SMALL = r"Seq Scan on (endpoints|scan_totals)|Index Scan using (endpoints|scan_totals)_pkey"


@dataclass(frozen=True)
class Case:
    sql: Sql
    params: dict[str, Any]
    sqlite: str | None  # a regex over SQLite's plan; None: the statement is PostgreSQL's only
    postgresql: str  # a regex over PostgreSQL's plan


# fmt: off
_LEASE = {"prefix": "0123456789abcdef-", "worker": "w1", "now": NOW, "expires": NOW + 30_000_000,
          "endpoint": 1, "limit": 10}
_HOLDER = {"scan": PENDING_ID, "endpoint": 1, "worker": "w1", "attempt": 2, "assignment": "a-10",
           "now": NOW, "until": NOW + 30_000_000, "reason": "waiting on upstream"}
_SETTLE = {"status": "FINISHED", "fail_reason": None, "finished_at": NOW, "dead_lettered_at": None,
           "result": "{}", "available_at": None, "outcome": "finished", "summary": None,
           "artifact": None, "total": "finished", "shard": 3}
_HISTORY = {"seq": 2, "leased_at": NOW - 1_000_000, "outcome": "lease_expired", "summary": None,
            "artifact": None}
_SUBMIT = {"endpoint": 1, "queue": "default", "name": "QUEUED4", "version": "1.0", "kind": "scan",
           "payload": None, "status": "QUEUED", "verified": True, "source": "feed", "now": NOW,
           "available": NOW}
_BATCH = {"scans": [PENDING_ID, PENDING_ID + 2], "attempts": [2, 1],
          "assignments": ["a-10", "a-12"], "statuses": ["FINISHED", "QUEUED"],
          "fail_reasons": [None, None], "finished": [NOW, None], "dead": [None, None],
          "results": ["{}", None], "available": [None, NOW + 10_000_000],
          "outcomes": ["finished", "failed"], "summaries": [None, "timeout"],
          "artifacts": [None, None], "shard": 3}
# A generic plan may take either PENDING-only index for one endpoint's lapses: both read
# leases in flight, never the queue or the history, and stop at the first unexpired lease.
PG_PENDING = pg_index("ix_scans_pending_lease") + "|" + pg_index("ix_scans_lease_due")
_QUEUED_DUE = sqlite_index("ix_scans_queued") + r"endpoint_id=\? AND available_at<\?\)"

CASES = {
    "lease_due": Case(LEASE_DUE, _LEASE, _QUEUED_DUE, pg_index("ix_scans_queued")),
    "lapsed_of_endpoint": Case(LAPSED_OF_ENDPOINT, {"endpoint": 1, "now": NOW, "limit": 100},
                               sqlite_index("ix_scans_pending_lease"), PG_PENDING),
    "lapsed_anywhere": Case(LAPSED_ANYWHERE, {"now": NOW, "limit": 500},
                            sqlite_index("ix_scans_lease_due"), pg_index("ix_scans_lease_due")),
    "close_lapsed": Case(CLOSE_LAPSED, _HOLDER | _HISTORY, NO_SCAN, INSERT_ATTEMPT),
    "dead_letter_lapsed": Case(DEAD_LETTER_LAPSED, _HOLDER | {"reason": "lease_expired"},
                               SQLITE_PK, PG_PK),
    "requeue_lapsed": Case(REQUEUE_LAPSED, _HOLDER | {"available": NOW + 10_000_000},
                           SQLITE_PK, PG_PK),
    "endpoint_names": Case(ENDPOINT_NAMES, {}, r"^SCAN endpoints\b", PG_SMALL),
    "insert_scan": Case(INSERT_SCAN, _SUBMIT, NO_SCAN,
                        r"^\s*Conflict Arbiter Indexes: ux_scans_live_key$"),
    "live_scan": Case(LIVE_SCAN, _SUBMIT, sqlite_index("ux_scans_live_key"),
                      pg_index("ux_scans_live_key")),
    "promote": Case(PROMOTE, {"id": QUARANTINED_ID, "now": NOW, "verified": True, "source": None},
                    SQLITE_PK, PG_PK),
    "diagnose": Case(DIAGNOSE, _HOLDER, SQLITE_PK, PG_PK),
    "insert_history": Case(INSERT_HISTORY, _HOLDER | _HISTORY, NO_SCAN, INSERT_ATTEMPT),
    "fail_unleased": Case(FAIL_UNLEASED, {"scan": QUARANTINED_ID, "now": NOW}, SQLITE_PK, PG_PK),
    "endpoint_by_id": Case(ENDPOINT_BY_ID, {"id": 1},
                           r"^SEARCH endpoints USING INTEGER PRIMARY KEY", PG_SMALL),
    "bump_totals": Case(BUMP, {"n": 1, "endpoint": 1, "outcome": "finished", "shard": 3},
                        r"^SEARCH scan_totals USING INDEX sqlite_autoindex_scan_totals_1",
                        PG_SMALL),
    "close_hot": Case(close_sql(echoed=True, with_worker=True, one_trip=True),
                      _HOLDER | _SETTLE, SQLITE_PK, PG_PK),
    "close_batch": Case(CLOSE_BATCH, _HOLDER | _BATCH, None, PG_PK),
    **{f"close_{echoed}_{worker}": Case(close_sql(echoed=echoed, with_worker=worker),
                                        _HOLDER | _SETTLE, SQLITE_PK, PG_PK)
       for echoed in (True, False) for worker in (True, False)},
    **{f"{kind}_{echoed}": Case(touch_sql(kind, echoed=echoed), _HOLDER, SQLITE_PK, PG_PK)
       for kind in ("heartbeat", "wait", "resume") for echoed in (True, False)},
}
# fmt: on


def plan_of(engine: Engine, sql: Sql, params: Mapping[str, Any]) -> str:
    if engine.dialect.name == "sqlite":
        return sqlite_plan(engine, sql, params)
    return pg_plan(engine, sql, params)


def assert_plan(engine: Engine, case: Case, plan: str) -> None:
    if engine.dialect.name == "sqlite":
        assert case.sqlite is not None
        assert_sqlite_plan(plan, case.sqlite)
    else:
        assert_pg_plan(plan, case.postgresql)


@pytest.mark.parametrize("name", sorted(CASES))
def test_hot_statement_walks_its_index(planned: Engine, name: str) -> None:
    case = CASES[name]
    if case.sqlite is None and planned.dialect.name == "sqlite":
        pytest.skip("a PostgreSQL-only statement")
    assert_plan(planned, case, plan_of(planned, case.sql, case.params))


def bound(sql: Sql, literal: str, parameters: str) -> Sql:
    """`sql` with a literal predicate spelled with parameters instead."""
    pg = sql.postgresql or sql.sqlite
    assert literal in sql.sqlite and literal in pg
    return Sql(f"{sql.name}_bound", *(t.replace(literal, parameters) for t in (sql.sqlite, pg)))


def test_bound_statuses_lose_the_live_key_index(planned: Engine) -> None:
    """Negative control, the intake bug of issue 7: with the live statuses bound as an IN-list
    neither planner proves ux_scans_live_key's predicate, and the assertions reject the plan."""
    live = bound(LIVE_SCAN, LIVE_PREDICATE, "status IN (:live1, :live2, :live3)")
    statuses = dict(zip(("live1", "live2", "live3"), LIVE, strict=True))
    plan = plan_of(planned, live, _SUBMIT | statuses)
    assert "ux_scans_live_key" not in plan, plan
    with pytest.raises(AssertionError):
        assert_plan(planned, CASES["live_scan"], plan)


def test_a_bound_status_loses_the_lease_index_in_a_generic_plan(planned: Engine) -> None:
    """Negative control: the lease with its status bound. PostgreSQL's generic plan cannot use
    ix_scans_queued and the assertions reject it. SQLite re-prepares a statement once values
    are bound and proves `status = ?` from the bound value (never an IN-list's), so there the
    index holds only for the right value: sqlite_plan binds what the server binds."""
    lease = bound(LEASE_DUE, "status = 'QUEUED'", "status = :status")
    plan = plan_of(planned, lease, _LEASE | {"status": "QUEUED"})
    if planned.dialect.name == "sqlite":
        assert_plan(planned, CASES["lease_due"], plan)
        plan = plan_of(planned, lease, _LEASE | {"status": "FINISHED"})
    assert "ix_scans_queued" not in plan, plan
    with pytest.raises(AssertionError):
        assert_plan(planned, CASES["lease_due"], plan)
